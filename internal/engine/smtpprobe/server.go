package smtpprobe

import (
	"strings"
	"time"
)

// serverKind is the mail server software a greeting names, where knowing
// it changes what a session may safely do. Each rule below says where the
// fact comes from; the README's "Email verification" section repeats them.
type serverKind uint8

const (
	otherServer serverKind = iota
	postfixServer
	eximServer
	exchangeServer
)

var serverNames = [...]string{"other", "postfix", "exim", "exchange"}

func (k serverKind) String() string { return serverNames[k] }

// recognise reads the server software from a 220 greeting. The defaults
// name it: Postfix's smtpd_banner is "$myhostname ESMTP $mail_name"
// ("Postfix"), Exim's smtp_banner "$smtp_active_hostname ESMTP Exim
// $version_number $tod_full", Exchange's "<fqdn> Microsoft ESMTP MAIL
// Service ready at <date>". Administrators may hide the name; then the
// server is "other" and its limits are learnt from its answers.
func recognise(greeting string) serverKind {
	t := strings.ToLower(greeting)
	switch {
	case strings.Contains(t, "postfix"):
		return postfixServer
	case strings.Contains(t, " exim"):
		return eximServer
	case strings.Contains(t, "microsoft esmtp mail service"):
		return exchangeServer
	}
	return otherServer
}

// Non-mail command budgets a session (RSETs after the first MAIL; a HELO
// after a refused EHLO).
const (
	// eximNonmail: Exim's smtp_accept_max_nonmail (default 10) drops the
	// connection ("554 Too many nonmail commands") once a session has sent
	// more than 10 commands other than MAIL, RCPT, DATA, BDAT and QUIT.
	// One RSET and one EHLO/HELO per message are not counted, and the
	// count is reset only at the start of a connection (smtp_in.c:
	// nonmail_command_count), so a session that never sends DATA gets
	// 1 + 10 RSETs. We keep to 10, and to 10 for every server that does
	// not name itself: it is the strictest default known.
	eximNonmail = 10
	// postfixNonmail: Postfix's smtpd_junk_command_limit (default 100)
	// counts HELO, EHLO, RSET, NOOP, VRFY and ETRN, and each beyond it is
	// an error of the session; the count is reset only when mail is
	// delivered (smtpd.c). 90 leaves room for EHLO and HELO.
	postfixNonmail = 90
)

// postfixSoftErrors is Postfix's default smtpd_soft_error_limit: from
// this many errors on it sleeps smtpd_error_sleep_time (postfixErrorSleep)
// before every reply.
const (
	postfixSoftErrors = 10
	postfixErrorSleep = time.Second
)

// postfixSlowZoneRejects: the rejections a session to a Postfix host that
// limits connections in windows may get, two short of its default
// smtpd_hard_error_limit (20): the 20th error is answered, the next
// command gets "421 4.7.0 Error: too many errors".
const postfixSlowZoneRejects = 18

// postfixHardErrors is Postfix's default smtpd_hard_error_limit.
const postfixHardErrors = 20

// serverRules is what a session to a kind of server keeps to.
type serverRules struct {
	// rejects: a rejection budget applies (Config.MaxRejectsPerSession).
	// Postfix counts every refused command (a rejected or deferred RCPT,
	// a refused MAIL) as an error of the session; RSET does not reset the
	// count, only delivered mail does; from smtpd_soft_error_limit (10)
	// errors on it sleeps smtpd_error_sleep_time (1s) before every reply
	// and it hangs up at smtpd_hard_error_limit (20) (smtpd.c,
	// smtpd_chat.c, postconf(5)).
	rejects bool
	// nonmail is the budget of non-mail commands a session.
	nonmail int
	// watchSlow: a reply held back (slowReplyGap) after some rejections
	// means an error budget met (Postfix with its name hidden): drop the
	// session and keep later ones short of it. Off where delays come per
	// rejection and a new session would not help: Exchange's
	// TarpitInterval (default 5s) delays every "550 5.1.1" to an
	// anonymous sender (Recipient Filter agent), Exim ACLs "delay" each
	// failed recipient, and neither has a budget that a new session
	// resets any differently from the pause itself.
	watchSlow bool
}

func rulesFor(k serverKind) serverRules {
	switch k {
	case postfixServer:
		return serverRules{rejects: true, nonmail: postfixNonmail, watchSlow: true}
	case eximServer:
		return serverRules{nonmail: eximNonmail}
	case exchangeServer:
		return serverRules{nonmail: eximNonmail}
	}
	return serverRules{nonmail: eximNonmail, watchSlow: true}
}
