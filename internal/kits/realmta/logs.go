package realmta

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// HostCounts is what one host's own log says it saw.
type HostCounts struct {
	Host string
	Kind string

	// Sessions: connections that reached smtpd or Exim (anvil's refused
	// ones included: Postfix logs "connect from" before refusing).
	Sessions int
	// Disconnects: sessions whose end is logged (Postfix's "disconnect
	// from"; Exim's "closed by QUIT", "lost", "dropped"). Equal to
	// Sessions once every session's log lines are in.
	Disconnects int
	// AnvilRefused: greetings answered "421 4.7.0 ... too many
	// connections" (Postfix's "Connection rate/concurrency limit
	// exceeded"); AnvilRate and AnvilCount split them by limit. The same
	// for sendmail's ratecontrol and conncontrol ("421 4.3.2 Connection
	// rate limit exceeded." / "Too many open connections.") and Haraka's
	// limit plugin (rate_conn / concurrency).
	AnvilRefused, AnvilRate, AnvilCount int
	// RCPT, RCPTAccepted: RCPT commands and the accepted ones (Postfix's
	// disconnect lines, which count an RCPT refused "452 4.5.3 Error: too
	// many recipients" as accepted and do not log it otherwise; Exim's
	// logged rejects and accepts).
	RCPT, RCPTAccepted int
	MAIL, RSET         int // Postfix only (its disconnect lines)
	// MaxRSET and MaxRejected: the most RSETs, and the most refused MAIL
	// and RCPT commands (Postfix's errors of a session: past
	// smtpd_soft_error_limit, 10, it sleeps a second before each reply),
	// in any one session (Postfix only).
	MaxRSET, MaxRejected int
	// Rejects by reply code ("550", "450", "452", "552"...) of RCPT
	// rejections.
	Rejects map[string]int
	// Greylisted: RCPTs answered 450 "Greylisted" by postgrey's verdict.
	Greylisted int
	// TooManyErrors: sessions Postfix closed with "421 4.7.0 Error: too
	// many errors" (smtpd_hard_error_limit; RSETs past
	// smtpd_junk_command_limit count as errors).
	TooManyErrors int
	// QueueFiles: transactions that opened a queue file (an accepted
	// RCPT; logged "<queue id>: client="). Each took an in_flow_delay
	// token: once the instance's pool (default_process_limit) is spent
	// and the queue manager gives none back, each costs in_flow_delay.
	QueueFiles int
	// Postscreen: new clients that passed, known clients let through,
	// and pregreet violations.
	PostscreenPassNew, PostscreenPassOld, Pregreet int
	// TooManyNonmail: Exim sessions dropped for "too many nonmail
	// commands" (smtp_accept_max_nonmail, 10 by default; RSET counts).
	TooManyNonmail int
	// EximRefused: Exim connections refused for too many at once
	// (smtp_accept_max, 20 by default).
	EximRefused int
	// MaxTxnRCPT: the most RCPT commands in one transaction (sendmail and
	// Haraka, whose logs show every command).
	MaxTxnRCPT int
	// Throttled: RCPT replies sendmail delayed a second for its bad
	// recipient throttle (those after the BadRcptThrottle-th refused
	// recipient of their transaction: MAIL and RSET start the count
	// again); Haraka: replies karma's tarpit delayed.
	Throttled int
	// MaxConcurrent and MaxConnsPerWindow (Haraka only: its log has
	// timestamps): the most sessions at once, and the most connections
	// within any span of Options.AnvilRateTimeUnit (default 60s).
	MaxConcurrent, MaxConnsPerWindow int
	// Disconnected: sessions the server ended itself (Haraka's limit
	// plugin past [errors] max, sendmail's 421s).
	Disconnected int
}

// Counts is the hosts' own view, parsed from their logs.
type Counts struct {
	Hosts map[string]*HostCounts
	Total HostCounts
	// Postgrey's own decisions (its log): greylisted triplets (new or
	// retried too early) and passes.
	PostgreyGreylist, PostgreyPass int
}

var (
	pfLine     = regexp.MustCompile(`^\S+\s+\d+\s+\S+\s+\S+\s+` + postfixSyslog + `/([^/\s]+)/(smtpd|postscreen)\[\d+\]: (.*)$`)
	pfCmd      = regexp.MustCompile(`\b(mail|rcpt|rset)=(\d+)(?:/(\d+))?`)
	pfReject   = regexp.MustCompile(`^(?:NOQUEUE|[0-9A-F]+): reject: RCPT from \S+: (\d{3}) `)
	pfQueueID  = regexp.MustCompile(`^[0-9A-F]{6,}: client=`)
	eximIface  = regexp.MustCompile(`I=\[([0-9.]+)\]:\d+`)
	eximReject = regexp.MustCompile(`rejected RCPT <`)
)

// Counts reads the logs written so far. Postfix writes through postlogd,
// so the last lines may lag a moment behind the session that caused them.
// The kit's own readiness probes (waitGreeting) are left out: Postfix's,
// Exim's and Haraka's lines by their client address, sendmail's sessions
// by the probe's NOOP.
func (r *Running) Counts() (Counts, error) {
	c := Counts{Hosts: map[string]*HostCounts{}}
	probe := "[" + r.probeAddr().String() + "]"
	byAddr := map[string]*HostCounts{}
	for _, h := range r.World.Hosts {
		hc := &HostCounts{Host: h.Name, Kind: h.Kind(), Rejects: map[string]int{}}
		c.Hosts[h.Name] = hc
		byAddr[r.hostAddr[h.Name].String()] = hc
	}
	if err := eachLine(r.logPath("postfix.log"), func(line string) {
		m := pfLine.FindStringSubmatch(line)
		if m == nil || strings.Contains(m[3], probe) {
			return
		}
		if hc := c.Hosts[m[1]]; hc != nil {
			postfixLine(hc, m[2], m[3])
		}
	}); err != nil {
		return c, err
	}
	// Exim's main log: every line of a session carries the interface
	// (log_selector +incoming_interface; the accepted-RCPT logwrite adds
	// it too).
	if err := eachLine(r.logPath("exim/mainlog"), func(line string) {
		m := eximIface.FindStringSubmatch(line)
		if m == nil || strings.Contains(line, probe) {
			return
		}
		hc := byAddr[m[1]]
		if hc == nil {
			return
		}
		switch {
		case strings.Contains(line, "SMTP connection from") && strings.Contains(line, "(TCP/IP connection count"):
			hc.Sessions++
		case strings.Contains(line, "rcpt accepted <"):
			hc.RCPT++
			hc.RCPTAccepted++
		case eximReject.MatchString(line):
			hc.RCPT++
			hc.Rejects["550"]++
		case strings.Contains(line, "too many nonmail commands"):
			hc.TooManyNonmail++
			hc.Disconnects++
		case strings.Contains(line, "SMTP connection from") && (strings.Contains(line, " closed by ") || strings.Contains(line, " lost")):
			hc.Disconnects++
		case strings.Contains(line, "refused: too many connections"):
			hc.EximRefused++
		}
	}); err != nil {
		return c, err
	}
	for i, h := range r.World.Hosts {
		switch h.Software {
		case Sendmail:
			if err := sendmailCounts(r.sendmailLog(i), c.Hosts[h.Name], h.BadRcptThrottle); err != nil {
				return c, err
			}
		case Haraka:
			if err := r.harakaCounts(i, c.Hosts[h.Name]); err != nil {
				return c, err
			}
		}
	}
	if err := eachLine(r.logPath("postgrey.log"), func(line string) {
		switch {
		case strings.Contains(line, "action=greylist"):
			c.PostgreyGreylist++
		case strings.Contains(line, "action=pass"):
			c.PostgreyPass++
		}
	}); err != nil {
		return c, err
	}
	t := &c.Total
	t.Rejects = map[string]int{}
	for _, hc := range c.Hosts {
		t.Sessions += hc.Sessions
		t.Disconnects += hc.Disconnects
		t.MaxRSET, t.MaxRejected = max(t.MaxRSET, hc.MaxRSET), max(t.MaxRejected, hc.MaxRejected)
		t.AnvilRefused += hc.AnvilRefused
		t.AnvilRate += hc.AnvilRate
		t.AnvilCount += hc.AnvilCount
		t.RCPT += hc.RCPT
		t.RCPTAccepted += hc.RCPTAccepted
		t.MAIL += hc.MAIL
		t.RSET += hc.RSET
		t.Greylisted += hc.Greylisted
		t.TooManyErrors += hc.TooManyErrors
		t.QueueFiles += hc.QueueFiles
		t.PostscreenPassNew += hc.PostscreenPassNew
		t.PostscreenPassOld += hc.PostscreenPassOld
		t.Pregreet += hc.Pregreet
		t.TooManyNonmail += hc.TooManyNonmail
		t.EximRefused += hc.EximRefused
		t.MaxTxnRCPT = max(t.MaxTxnRCPT, hc.MaxTxnRCPT)
		t.Throttled += hc.Throttled
		t.Disconnected += hc.Disconnected
		t.MaxConcurrent = max(t.MaxConcurrent, hc.MaxConcurrent)
		t.MaxConnsPerWindow = max(t.MaxConnsPerWindow, hc.MaxConnsPerWindow)
		for k, v := range hc.Rejects {
			t.Rejects[k] += v
		}
	}
	return c, nil
}

// SettledCounts waits (up to timeout) until the logs stop growing for a
// moment, then returns Counts: postlogd writes Postfix's lines a little
// after the sessions that caused them.
func (r *Running) SettledCounts(timeout time.Duration) (Counts, error) {
	size := func() int64 {
		var n int64
		for _, f := range r.logNames() {
			if st, err := os.Stat(r.logPath(f)); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	deadline := time.Now().Add(timeout)
	last := size()
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if n := size(); n == last {
			break
		} else {
			last = n
		}
	}
	return r.Counts()
}

// logNames are the world's logs that grow with sessions (LogTail names).
func (r *Running) logNames() []string {
	names := []string{"postfix.log", "exim/mainlog", "postgrey.log"}
	for i, h := range r.World.Hosts {
		switch h.Software {
		case Sendmail:
			names = append(names, filepath.Base(r.sendmailLog(i)))
		case Haraka:
			names = append(names, filepath.Base(r.harakaLog(i)))
		}
	}
	return names
}

// sendmailCounts reads one sendmail host's traffic log (-X): lines "PID
// <<< command" and "PID >>> reply", the pid being the process serving the
// session. sendmail reads one command and answers it before reading the
// next, so a session's lines alternate. A session has ended when its
// process is gone (or it said 221 or 421).
func sendmailCounts(path string, hc *HostCounts, throttle int) error {
	type sess struct {
		smtpTally
		ended bool
	}
	// The kit's readiness probe's session (waitGreeting): its pid.
	probes := map[string]bool{}
	if err := eachLine(path, func(line string) {
		if pid, rest, ok := strings.Cut(line, " "); ok && strings.HasPrefix(rest, "<<< NOOP "+probeMark) {
			probes[pid] = true
		}
	}); err != nil {
		return err
	}
	ss := map[string]*sess{}
	var order []string
	err := eachLine(path, func(line string) {
		pid, rest, ok := strings.Cut(line, " ")
		if !ok || len(rest) < 4 || probes[pid] {
			return
		}
		dir, text := rest[:3], rest[4:]
		s := ss[pid]
		if s == nil {
			// A session starts with its greeting (the daemon's own
			// messages carry its pid too).
			if dir != ">>>" || !(strings.HasPrefix(text, "220") || strings.HasPrefix(text, "421")) {
				return
			}
			s = &sess{}
			ss[pid] = s
			order = append(order, pid)
			hc.Sessions++
		}
		if dir == "<<<" {
			// sendmail counts every RCPT error of a transaction toward
			// its throttle, "452 4.5.3 Too many recipients" too
			// (srvrsmtp.c: rcpt_done, ++n_badrcpts).
			if s.command(hc, text) == "RCPT" && throttle > 0 && s.txnRefused >= throttle {
				hc.Throttled++
			}
			return
		}
		if dir != ">>>" || len(text) < 4 || text[3] == '-' {
			return
		}
		code := text[:3]
		switch {
		case strings.HasPrefix(text, "421 4.3.2 Connection rate limit"):
			hc.AnvilRefused++
			hc.AnvilRate++
		case strings.HasPrefix(text, "421 4.3.2 Too many open connections"):
			hc.AnvilRefused++
			hc.AnvilCount++
		}
		if code == "221" || code == "421" {
			s.ended = true
			// sendmail also says 421 to a client that has gone ("Lost
			// input channel"): that one it did not end itself.
			if code == "421" && !strings.Contains(text, "Lost input channel") {
				hc.Disconnected++
			}
		}
		s.reply(hc, code)
	})
	for _, pid := range order {
		if ss[pid].ended || !pidAlive(pid) {
			hc.Disconnects++
		}
	}
	return err
}

// smtpTally follows one session's commands and replies in a server's own
// log of its dialogue (sendmail's -X trace, Haraka's protocol lines) and
// counts into a HostCounts what reads alike in every such log: MAIL, RSET
// and RCPT, RCPTs a transaction, RCPT replies and refusals a session.
type smtpTally struct {
	cmd        string // the verb awaiting its reply
	txnRCPT    int    // the transaction's RCPTs
	txnRefused int    // the transaction's RCPTs refused, 4xx too
	refused    int    // the session's RCPTs refused with 5xx
}

// command notes a command as the client sent it; it returns its verb.
func (s *smtpTally) command(hc *HostCounts, text string) string {
	verb := strings.ToUpper(strings.SplitN(strings.TrimSpace(text), " ", 2)[0])
	if i := strings.IndexByte(verb, ':'); i > 0 {
		verb = verb[:i]
	}
	s.cmd = verb
	switch verb {
	case "MAIL":
		hc.MAIL++
		s.txnRCPT, s.txnRefused = 0, 0
	case "RSET":
		hc.RSET++
		s.txnRCPT, s.txnRefused = 0, 0
	case "RCPT":
		hc.RCPT++
		s.txnRCPT++
		hc.MaxTxnRCPT = max(hc.MaxTxnRCPT, s.txnRCPT)
	}
	return verb
}

// reply notes the code of the last line of a reply to the command awaiting
// one.
func (s *smtpTally) reply(hc *HostCounts, code string) {
	if s.cmd == "RCPT" {
		if code[0] == '2' {
			hc.RCPTAccepted++
		} else {
			hc.Rejects[code]++
			s.txnRefused++
			if code[0] == '5' {
				s.refused++
				hc.MaxRejected = max(hc.MaxRejected, s.refused)
			}
		}
	}
	s.cmd = ""
}

func pidAlive(pid string) bool {
	_, err := os.Stat(filepath.Join("/proc", pid))
	return err == nil
}

func postfixLine(hc *HostCounts, daemon, msg string) {
	if daemon == "postscreen" {
		switch {
		case strings.HasPrefix(msg, "PASS NEW "):
			hc.PostscreenPassNew++
		case strings.HasPrefix(msg, "PASS OLD "):
			hc.PostscreenPassOld++
		case strings.HasPrefix(msg, "PREGREET "):
			hc.Pregreet++
		}
		return
	}
	switch {
	case strings.HasPrefix(msg, "connect from "):
		hc.Sessions++
	case strings.HasPrefix(msg, "warning: Connection rate limit exceeded"):
		hc.AnvilRefused++
		hc.AnvilRate++
	case strings.HasPrefix(msg, "warning: Connection concurrency limit exceeded"):
		hc.AnvilRefused++
		hc.AnvilCount++
	case strings.HasPrefix(msg, "too many errors after "):
		hc.TooManyErrors++
	case strings.HasPrefix(msg, "disconnect from "):
		hc.Disconnects++
		rsets, rejected := 0, 0
		defer func() {
			hc.MaxRSET, hc.MaxRejected = max(hc.MaxRSET, rsets), max(hc.MaxRejected, rejected)
		}()
		for _, m := range pfCmd.FindAllStringSubmatch(msg, -1) {
			ok, _ := strconv.Atoi(m[2])
			all := ok
			if m[3] != "" {
				all, _ = strconv.Atoi(m[3])
			}
			if m[1] != "rset" {
				rejected += all - ok
			}
			switch m[1] {
			case "mail":
				hc.MAIL += all
			case "rset":
				hc.RSET += all
				rsets = all
			case "rcpt":
				hc.RCPT += all
				hc.RCPTAccepted += ok
			}
		}
	case pfQueueID.MatchString(msg):
		hc.QueueFiles++
	default:
		if m := pfReject.FindStringSubmatch(msg); m != nil {
			hc.Rejects[m[1]]++
			if strings.Contains(msg, "Greylisted") {
				hc.Greylisted++
			}
		}
	}
}

func eachLine(path string, f func(string)) error {
	fh, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f(sc.Text())
	}
	return sc.Err()
}
