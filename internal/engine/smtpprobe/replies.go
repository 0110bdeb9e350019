package smtpprobe

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// rfcReplyTimeout is RFC 5321 §4.5.3.2's minimum wait for the reply to
// MAIL and to RCPT (and the server's own idle timeout): Config
// CommandTimeout's default.
const rfcReplyTimeout = 5 * time.Minute

// ReplyClass is a class of what a mail host says, or does, in answer to
// the prober: the rows of ReplyTable, the one home of what each means for
// an address's verdict and what the engine does next. The engine decides
// by class (commandClass, lostClass) and acts on the row's Next; the docs
// page docs/smtp-replies.md is rendered from the table (ReplyTableMarkdown).
type ReplyClass uint8

const (
	ReplyOK            ReplyClass = iota // 2xx to EHLO, MAIL or RSET
	ReplyAccepted                        // 2xx to RCPT
	ReplyMissing                         // mailbox unknown or disabled
	ReplyFull                            // mailbox full
	ReplyPolicy                          // refused by policy
	ReplyUnknown                         // other 5xx to RCPT
	ReplyTooMany                         // 452 too many recipients
	ReplyTemporary                       // other 4xx to RCPT
	ReplyClosing                         // 421: the server closes the session
	ReplyTooManyErrors                   // 421 "too many errors"
	ReplyDeferred                        // 4xx to the greeting, EHLO, MAIL or RSET
	ReplyRefused                         // 5xx greeting, EHLO and HELO, or MAIL
	ReplyNonmail                         // 5xx to RSET
	ReplySilent                          // nothing at all: connect or greeting
	ReplyTimeout                         // a reply later than CommandTimeout
	ReplyHangup                          // the connection closed mid-session
	ReplySlowed                          // pipelined replies held back one by one
	ReplyGroupLate                       // a group answered late after refusals
	ReplyProxyLost                       // the egress proxy failed
	ReplyReputation                      // every reply late once this egress sent unknown recipients
	numReplyClasses
)

// Next is what the engine does after a class of reply.
type Next uint8

const (
	NextGoOn        Next = iota // carry on in the session
	NextSettle                  // the address's verdict is final
	NextRetryLater              // the address waits, holding nothing, and is asked again
	NextTransaction             // the address goes in the next transaction, at once
	NextNewSession              // the session ends; its work goes to a new one
	NextSlowDown                // the host waits out a backoff, with fewer sessions
	NextShrink                  // smaller groups and transactions for the host
	NextOtherHost               // the host failed: the domain's next MX host
	NextOtherEgress             // the session goes again through another egress
)

var nextNames = [...]string{"go on", "settle", "retry later", "next transaction", "new session",
	"slow down", "shrink", "next MX host", "switch egress"}

func (n Next) String() string { return nextNames[n] }

// ReplyRule is one row of ReplyTable.
type ReplyRule struct {
	Class ReplyClass
	Name  string
	// When: the command (or moment) the reply answers; Looks: what it
	// looks like.
	When, Looks string
	// Verdict is the address's outcome (Outcome's string with its code),
	// "none" when the reply gives none.
	Verdict string
	Outcome Outcome // the outcome a NextSettle row gives
	Next    Next
	// Then says what Next means for this class: when, how often, and
	// what is learnt.
	Then string
}

// ReplyTable is every class of reply, in ReplyClass order.
var ReplyTable = [numReplyClasses]ReplyRule{
	{ReplyOK, "ok", "EHLO, HELO, MAIL, RSET", "2xx", "none", 0, NextGoOn,
		"the session goes on; EHLO's round trip is the host's baseline for late groups"},
	{ReplyAccepted, "accepted", "RCPT", "2xx", "deliverable (50), catchall (45)", Deliverable, NextSettle,
		"deliverable once the domain's random-address probe (one per domain, cached) is refused; catchall when it is accepted too"},
	{ReplyMissing, "missing", "RCPT", "5.1.1, 5.1.0, 5.1.3, 5.1.6, 5.1.10, 5.2.1; 550, 551, 553 or a user-unknown text without an enhanced code",
		"missing (400)", Missing, NextSettle, "final; a 5.1.1 (or Exim's unrouteable address) also shows the domain is no catch-all: no probe"},
	{ReplyFull, "full", "RCPT", "5.2.2; 552 or a quota text", "full (410)", Full, NextSettle, "final"},
	{ReplyPolicy, "policy", "RCPT", "5.7.x, 5.1.2; 554, relay or policy texts", "policy (420)", Policy, NextSettle,
		"final: the host refuses the recipient (or us) by policy"},
	{ReplyUnknown, "unknown", "RCPT", "other 5xx: 5.5.x (our syntax), 5.1.7 and 5.1.8 (our sender)", "unconfirmed (20)", Unconfirmed, NextSettle,
		"final: no verdict on the recipient"},
	{ReplyTooMany, "too many recipients", "RCPT", "452 4.5.3; 452 too many recipients", "none", 0, NextTransaction,
		"the host's limit a message, learnt at once: the address goes in the next transaction (RSET, MAIL) of the same session, never counted as refused; at the first RCPT of a later transaction, the limit is per session: a new session; at a session's very first RCPT, once more in a new session, then unconfirmed (20)"},
	{ReplyTemporary, "temporary", "RCPT", "450, 451, other 452 and 4xx (greylisting)", "unconfirmed (20) with greylisted when retries run out", Unconfirmed, NextRetryLater,
		"after Config.GreylistRetry (60s), at most Config.MaxGreylistRetries (3) times and while the call's deadline leaves room"},
	{ReplyClosing, "closing", "greeting, any command", "421", "none", 0, NextSlowDown,
		"the host asked to slow down: its queue waits Config.RefusalBackoff (2s, doubling up to 32 times, jittered), its sessions and connection rate are lowered; after Config.MaxRefusals (8) in a row it failed: next MX host"},
	{ReplyTooManyErrors, "too many errors", "any command", "421 ... too many errors", "none", 0, NextNewSession,
		"Postfix's hard error limit: the rest goes to a new session, which keeps to a rejection budget learnt from it"},
	{ReplyDeferred, "deferred", "greeting, EHLO, MAIL, RSET", "4xx", "none", 0, NextSlowDown, "as closing"},
	{ReplyRefused, "refused", "greeting, EHLO and HELO, MAIL", "5xx (a greeting other than 220)", "none from this host", 0, NextOtherHost,
		"the host takes no mail from us: the domain's next MX host; with none left, unconfirmed (20)"},
	{ReplyNonmail, "non-mail limit", "RSET", "5xx (Exim's 554 too many nonmail commands)", "none", 0, NextNewSession,
		"the rest goes to a new session, which keeps to the RSETs learnt from it"},
	{ReplySilent, "silent host", "connect, greeting", "connect refused or timed out (Config.ConnectTimeout), no byte within Config.GreetingTimeout (30s)", "timeout (5) when no MX host ever answered", Timeout, NextOtherHost,
		"the engine's own short budget, for a host that sends nothing at all: next MX host, and the host is skipped for Config.HostPenaltyTTL; a host that answered before is asked to slow down instead"},
	{ReplyTimeout, "reply timeout", "MAIL, RCPT, RSET, EHLO", "no reply within Config.CommandTimeout (5m, RFC 5321 §4.5.3.2) of the one before, or of sending a group (group-level silence)", "none", 0, NextNewSession,
		"a deadline per reply, restarted by every reply: a group is alive while replies come; before the session's first RCPT verdict the host failed (next MX host), after it the address in flight counts a drop (two: unconfirmed) and the rest go to a new session"},
	{ReplyHangup, "hang-up", "after the greeting", "connection closed or reset", "none", 0, NextNewSession,
		"as reply timeout; the RCPTs a session took before it is the host's limit a session, learnt"},
	{ReplySlowed, "slowed replies", "pipelined RCPT", "a reply 700ms after the one before, after 3 rejections in the session (Postfix's soft error limit under a hidden name)", "none", 0, NextNewSession,
		"the session ends at once; later ones keep to a rejection budget one short of it (not at Exim or Exchange, whose pauses come per rejection)"},
	{ReplyGroupLate, "late group", "pipelined group", "answered 700ms later than EHLO's round trip (beyond flow-control pauses) after refused RCPTs followed by others", "none", 0, NextShrink,
		"a bad-recipient throttle: the host's group is halved and its transactions take no more RCPTs than may be refused before the throttle starts (learnt from how late the group came); groups of a host known to be fast grow by what it answers"},
	{ReplyProxyLost, "proxy lost", "connect, any command", "the SOCKS5 proxy failed", "none", 0, NextOtherEgress,
		"the work goes back as it was, through the pool's next proxy; the host is not blamed"},
	{ReplyReputation, "reputation delay", "any reply, the greeting and EHLO of a new session too",
		"replies 700ms later than their round trip once this egress identity sent the host unknown recipients, in every session from then on (a reputation or karma plugin)", "none", 0, NextOtherEgress,
		"learnt per host, from reply latencies: the unknown recipients an identity may send before it is slowed, and the delay; the host's sessions go out through the identities whose reputation there is clean (Config.PickRoute), each keeping to that many unknown recipients; once every identity is slowed (or with one), sessions take whole transactions in small groups, as many side by side as the delay makes worth it"},
}

// Rule returns the row of class c.
func (c ReplyClass) Rule() ReplyRule { return ReplyTable[c] }

func (c ReplyClass) String() string { return ReplyTable[c].Name }

// rcptClass is the class of an RCPT reply other than 421.
func rcptClass(r reply) ReplyClass {
	switch classifyRcpt(r) {
	case kindAccepted:
		return ReplyAccepted
	case kindMissing:
		return ReplyMissing
	case kindFull:
		return ReplyFull
	case kindPolicy:
		return ReplyPolicy
	case kindTemporary:
		return ReplyTemporary
	case kindTooMany:
		return ReplyTooMany
	}
	return ReplyUnknown
}

// commandClass is the class of a reply to a command of a window.
func commandClass(kind cmdKind, r reply) ReplyClass {
	if r.code == 421 {
		if strings.Contains(strings.ToLower(r.text), "too many errors") {
			return ReplyTooManyErrors
		}
		return ReplyClosing
	}
	if kind == cmdRCPT {
		return rcptClass(r)
	}
	switch r.class() {
	case 2:
		return ReplyOK
	case 4:
		return ReplyDeferred
	}
	if kind == cmdRSET {
		return ReplyNonmail
	}
	return ReplyRefused
}

// greetingClass is the class of a greeting, or of the reply to EHLO or
// HELO.
func greetingClass(r reply, greeting bool) ReplyClass {
	switch {
	case r.code == 421:
		return ReplyClosing
	case r.class() == 4:
		return ReplyDeferred
	case greeting && r.code == 220, !greeting && r.class() == 2:
		return ReplyOK
	}
	return ReplyRefused
}

// lostClass is the class of the failure that ended a session mid-window.
func lostClass(err error) ReplyClass {
	var slow *slowedError
	switch {
	case errors.As(err, &slow):
		return ReplySlowed
	case isProxyLost(err):
		return ReplyProxyLost
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ReplyTimeout
	}
	return ReplyHangup
}

// ReplyTableMarkdown renders ReplyTable for docs/smtp-replies.md.
func ReplyTableMarkdown() string {
	var b strings.Builder
	b.WriteString("# SMTP replies: verdicts and what the engine does next\n\n")
	b.WriteString("<!-- Generated from internal/engine/smtpprobe/replies.go (ReplyTable) by\n" +
		"     `go test ./internal/engine/smtpprobe -run TestReplyTableDoc -update-docs`; do not edit. -->\n\n")
	b.WriteString("Every class of what a mail host says (or does) in answer to the prober, the verdict it\n" +
		"gives the address (with the engine's status code) and what the engine does next. The engine\n" +
		"classifies each reply into one of these rows and acts on the row; this page is rendered from\n" +
		"the same table. The prober never sends DATA.\n\n")
	b.WriteString("| Class | Answering | Looks like | Verdict | Next | Details |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range ReplyTable {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Name, r.When, mdCell(r.Looks), r.Verdict, r.Next, mdCell(r.Then))
	}
	return b.String()
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
