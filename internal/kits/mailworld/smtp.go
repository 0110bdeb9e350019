package mailworld

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"time"
)

const (
	maxLine      = 2048 // command line limit (RFC 5321 requires 512)
	maxBadCmds   = 10   // unknown/invalid commands before 421
	extSize      = "52428800"
	dataQueuedID = "MAILWORLD"
)

var errLineTooLong = errors.New("line too long")

type session struct {
	w    *World
	h    *host
	t    *domainState // connection-level settings of the host's group
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	helo string
	ip   string // the client's address (ReputationDelay)

	arrived time.Time // when the command being answered reached the server

	inTx     bool
	sender   string
	conRcpts int // RCPT commands in the connection
	rcpts    int // RCPT commands in the transaction
	accepted int // recipients accepted in the transaction
	refused  int // recipients refused in the transaction (BadRcptThrottle)
	bad      int
	errors   int // 4xx and 5xx replies in the session (ErrorLimits)
	nonmail  int // non-mail commands counted (NonmailLimit)
	// One RSET and one HELO/EHLO a message are not counted (Exim).
	freeRSET, freeHELO bool
}

func (w *World) serve(h *host, c net.Conn) {
	defer w.wg.Done()
	defer w.untrack(c)
	defer c.Close()
	n := h.cur.Add(1)
	storeMax(&h.maxCur, n)
	h.total.Add(1)
	h.noteConn(time.Now())
	storeMax(&w.peak, w.cur.Add(1))
	defer func() {
		h.cur.Add(-1)
		w.cur.Add(-1)
	}()

	t := h.group.tmpl
	if t.Tarpit {
		// Hold the connection, say nothing, until the client gives up
		// (or TarpitHangup passed).
		hold := w.opts.IdleTimeout
		if t.TarpitHangup > 0 {
			hold = t.TarpitHangup
		}
		c.SetReadDeadline(time.Now().Add(hold))
		io.Copy(io.Discard, c)
		return
	}
	wbuf := 1024
	if t.WholeGroups {
		wbuf = 256 << 10 // a group's replies are never flushed part way
	}
	rbuf := maxLine
	if t.WholeGroups {
		rbuf = 64 << 10 // a whole group is read before it is answered
	}
	s := &session{w: w, h: h, t: t, c: c, br: bufio.NewReaderSize(c, rbuf), bw: bufio.NewWriterSize(c, wbuf),
		arrived: time.Now(), freeRSET: true, freeHELO: true}
	defer s.flush()
	ip, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	s.ip = ip
	// Postfix's anvil counts every connection in the rate, refused or not.
	overRate := t.ConnRateLimit > 0 && !h.countConn(ip, t.ConnRateLimit, t.ConnRateWindow, t.ConnRateSliding, time.Now())
	clientOK, release := h.holdClient(ip, t.ClientConns)
	defer release()
	if (t.MaxConns > 0 && n > int64(t.MaxConns)) || overRate || !clientOK {
		h.rejected.Add(1)
		s.reply("421 4.7.0 " + h.name + " Error: too many connections from " + ip)
		return
	}
	s.arrived = s.arrived.Add(t.GreetingDelay)
	banner := "ESMTP mailworld"
	switch {
	case t.Banner != "":
		banner = t.Banner
	case t.SoftErrors > 0:
		banner = "ESMTP Postfix"
	case t.NonmailLimit > 0:
		banner = "ESMTP Exim 4.96"
	}
	if !s.reply("220 " + h.name + " " + banner) {
		return
	}
	for s.step() {
	}
}

// step reads and answers one command; false ends the session.
func (s *session) step() bool {
	if s.t.HardErrors > 0 && s.errors >= s.t.HardErrors {
		s.h.tooManyErrors.Add(1)
		s.reply("421 4.7.0 " + s.h.name + " Error: too many errors")
		return false
	}
	line, err := s.readLine()
	if errors.Is(err, errLineTooLong) {
		return s.bump("500 5.5.2 Error: line too long")
	}
	if err != nil {
		return false
	}
	verb, arg := line, ""
	if i := strings.IndexByte(line, ' '); i >= 0 {
		verb, arg = line[:i], strings.TrimSpace(line[i+1:])
	}
	h := s.h
	if !s.countNonmail(strings.ToUpper(verb)) {
		h.nonmailDrops.Add(1)
		s.reply("554 Too many nonmail commands")
		return false
	}
	switch strings.ToUpper(verb) {
	case "EHLO", "HELO":
		return s.cmdHELO(verb, arg)
	case "MAIL":
		return s.cmdMAIL(arg)
	case "RCPT":
		return s.cmdRCPT(arg)
	case "DATA":
		return s.cmdDATA()
	case "RSET":
		h.rset.Add(1)
		s.resetTx()
		return s.reply("250 2.0.0 Ok")
	case "NOOP":
		return s.reply("250 2.0.0 Ok")
	case "VRFY":
		return s.reply("252 2.5.2 Cannot VRFY user, but will accept message and attempt delivery")
	case "HELP":
		return s.reply("214 2.0.0 Commands: EHLO HELO MAIL RCPT DATA RSET NOOP VRFY QUIT")
	case "QUIT":
		s.reply("221 2.0.0 Bye")
		return false
	case "EXPN", "ETRN", "TURN", "STARTTLS", "AUTH", "BDAT":
		return s.bump("502 5.5.1 Error: command not implemented")
	default:
		return s.bump("500 5.5.2 Error: command not recognized")
	}
}

// countNonmail counts a non-mail command as Exim does
// (smtp_accept_max_nonmail) and reports whether it is within NonmailLimit.
func (s *session) countNonmail(verb string) bool {
	if s.t.NonmailLimit <= 0 {
		return true
	}
	switch verb {
	case "MAIL", "RCPT", "DATA", "BDAT", "QUIT":
		return true
	case "RSET":
		if s.freeRSET {
			s.freeRSET = false
			return true
		}
	case "EHLO", "HELO":
		if s.freeHELO {
			s.freeHELO = false
			return true
		}
	}
	s.nonmail++
	return s.nonmail <= s.t.NonmailLimit
}

// cmdHELO answers EHLO and HELO, starting afresh.
func (s *session) cmdHELO(verb, arg string) bool {
	s.h.ehlo.Add(1)
	if s.t.DropConnection {
		return false
	}
	if arg == "" {
		return s.bump("501 5.5.4 Syntax: " + strings.ToUpper(verb) + " hostname")
	}
	s.w.noteName(s.w.ehloNames, arg)
	s.helo = arg
	s.resetTx()
	if strings.EqualFold(verb, "HELO") {
		return s.reply("250 " + s.h.name)
	}
	return s.reply(
		"250-"+s.h.name+" Hello "+arg,
		"250-PIPELINING",
		"250-SIZE "+extSize,
		"250-8BITMIME",
		"250-ENHANCEDSTATUSCODES",
		"250 SMTPUTF8")
}

// cmdMAIL opens a transaction.
func (s *session) cmdMAIL(arg string) bool {
	s.h.mail.Add(1)
	if s.helo == "" {
		return s.bump("503 5.5.1 Error: send HELO/EHLO first")
	}
	if s.inTx {
		return s.bump("503 5.5.1 Error: nested MAIL command")
	}
	path, ok := parsePath(arg, "FROM:")
	if !ok {
		return s.bump("501 5.5.4 Syntax: MAIL FROM:<address>")
	}
	s.w.noteName(s.w.mailFrom, path)
	s.inTx, s.sender, s.rcpts, s.accepted, s.refused = true, strings.ToLower(path), 0, 0, 0
	return s.reply("250 2.1.0 Ok")
}

// cmdRCPT answers a recipient as its mailbox's behaviour says.
func (s *session) cmdRCPT(arg string) bool {
	s.h.rcpt.Add(1)
	if !s.inTx {
		return s.bump("503 5.5.1 Error: need MAIL command")
	}
	if s.t.DropAtRCPT {
		return false
	}
	path, ok := parsePath(arg, "TO:")
	if !ok || path == "" {
		return s.bump("501 5.5.4 Syntax: RCPT TO:<address>")
	}
	s.rcpts++
	s.conRcpts++
	if (s.t.RcptLimit > 0 && s.conRcpts > s.t.RcptLimit) || (s.t.TxRcptLimit > 0 && s.rcpts > s.t.TxRcptLimit) ||
		(s.t.SecondRCPT452 && s.rcpts > 1) {
		return s.reply(tooManyRcpts)
	}
	r := s.rcptReply(path)
	if strings.HasPrefix(r, "250") {
		if s.accepted == 0 && s.t.InFlowDelay > 0 {
			// The first accepted recipient opens the queue file, and
			// Postfix's cleanup pauses in_flow_delay before taking it.
			s.h.flowDelays.Add(1)
			s.pause(s.t.InFlowDelay)
		}
		s.accepted++
	} else {
		defer func() { s.refused++ }() // this reply is not held for itself
		if s.t.ReputationDelay > 0 && strings.HasPrefix(r, "550 5.1.1") {
			defer s.h.markUnknown(s.ip) // from the next reply on
		}
	}
	return s.reply(r)
}

// tooManyRcpts is Postfix's reply to an RCPT over smtpd_recipient_limit:
// not an error of the session until smtpd_recipient_overshoot_limit (1000).
const tooManyRcpts = "452 4.5.3 Error: too many recipients"

// cmdDATA reads and discards the message.
func (s *session) cmdDATA() bool {
	s.h.dataCmd.Add(1)
	if !s.inTx {
		return s.bump("503 5.5.1 Error: need RCPT command")
	}
	if s.accepted == 0 {
		return s.reply("554 5.5.1 Error: no valid recipients")
	}
	if !s.reply("354 End data with <CR><LF>.<CR><LF>") {
		return false
	}
	if err := s.readData(); err != nil {
		return false
	}
	s.resetTx()
	s.freeRSET, s.freeHELO = true, true
	return s.reply("250 2.0.0 Ok: queued as " + dataQueuedID + " (discarded)")
}

// bump answers a client error, closing the session after too many.
func (s *session) bump(msg string) bool {
	s.bad++
	if s.bad > maxBadCmds {
		s.reply("421 4.7.0 " + s.h.name + " Error: too many errors")
		return false
	}
	return s.reply(msg)
}

func (s *session) resetTx() {
	s.inTx, s.sender, s.rcpts, s.accepted, s.refused = false, "", 0, 0, 0
}

func (s *session) rcptReply(path string) string {
	local, domain, ok := split(path)
	if !ok {
		if strings.EqualFold(path, "postmaster") {
			return "250 2.1.5 Ok"
		}
		return "501 5.1.3 Bad recipient address syntax"
	}
	ds := s.h.group.domains[domain]
	if ds == nil {
		return "550 5.7.1 <" + path + ">: Relay access denied"
	}
	if ds.PolicyReject {
		return "550 5.7.1 <" + path + ">: Recipient address rejected: Access denied by policy"
	}
	if ds.Greylist > 0 && !s.w.greyPass(ds, s.sender, local+"@"+domain) {
		return "451 4.7.1 <" + path + ">: Recipient address rejected: Greylisted, please try again later"
	}
	switch ds.behaviour(local) {
	case Exists, CatchAll:
		return "250 2.1.5 Ok"
	case Full:
		return "552 5.2.2 <" + path + ">: Mailbox full"
	case Disabled:
		return "550 5.2.1 <" + path + ">: Mailbox disabled"
	case TempFail:
		return "450 4.2.1 <" + path + ">: Mailbox temporarily unavailable"
	default:
		return "550 5.1.1 <" + path + ">: Recipient address rejected: User unknown"
	}
}

func (w *World) greyPass(ds *domainState, sender, rcpt string) bool {
	key := sender + "\x00" + rcpt
	now := w.opts.Now()
	ds.greyMu.Lock()
	defer ds.greyMu.Unlock()
	if ds.grey == nil {
		ds.grey = make(map[string]time.Time)
	}
	first, seen := ds.grey[key]
	if !seen {
		ds.grey[key] = now
		return false
	}
	return now.Sub(first) >= ds.Greylist
}

// parsePath extracts the address of "FROM:<a@b> PARAMS" / "TO:<a@b>".
// Lenient: a space after the colon and a bare address are accepted.
func parsePath(arg, prefix string) (string, bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	rest := strings.TrimLeft(arg[len(prefix):], " ")
	var path string
	if strings.HasPrefix(rest, "<") {
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return "", false
		}
		path = rest[1:end]
		if i := strings.IndexByte(path, ':'); i >= 0 && strings.HasPrefix(path, "@") {
			path = path[i+1:] // source route
		}
	} else {
		path, _, _ = strings.Cut(rest, " ")
		if path == "" {
			return "", false
		}
	}
	if strings.ContainsAny(path, " <>") {
		return "", false
	}
	return path, true
}

// readLine reads one CRLF (or LF) terminated command line, flushing pending
// replies first unless a complete pipelined command is already buffered.
func (s *session) readLine() (string, error) {
	if s.bw.Buffered() > 0 {
		if b, _ := s.br.Peek(s.br.Buffered()); bytes.IndexByte(b, '\n') < 0 {
			if !s.flush() {
				return "", io.ErrClosedPipe
			}
		}
	}
	s.c.SetReadDeadline(time.Now().Add(s.w.opts.IdleTimeout))
	fresh := s.br.Buffered() == 0 // a pipelined command arrived with the one before
	line, err := s.br.ReadSlice('\n')
	if fresh {
		s.arrived = time.Now()
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = s.br.ReadSlice('\n')
		}
		if err != nil {
			return "", err
		}
		return "", errLineTooLong
	}
	if err != nil {
		return "", err
	}
	line = bytes.TrimRight(line, "\r\n")
	return string(line), nil
}

// readData consumes a message up to the lone "." line and discards it.
func (s *session) readData() error {
	if !s.flush() {
		return io.ErrClosedPipe
	}
	atStart := true
	for {
		s.c.SetReadDeadline(time.Now().Add(s.w.opts.IdleTimeout))
		chunk, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			atStart = false
			continue
		}
		if err != nil {
			return err
		}
		if atStart && (string(chunk) == ".\r\n" || string(chunk) == ".\n") {
			return nil
		}
		atStart = true
	}
}

// reply queues reply lines once the configured latency has passed since
// the command arrived: a round trip, so pipelined commands (which arrive
// together) are answered together. Replies are flushed before the next
// blocking read, so pipelined commands get their replies in one write.
func (s *session) reply(lines ...string) bool {
	at := s.arrived.Add(s.latency())
	held := s.t.SoftErrors > 0 && s.errors >= s.t.SoftErrors
	if held {
		// Postfix sleeps before every reply, so pipelined replies queue up.
		s.h.slowed.Add(1)
		if now := time.Now(); at.Before(now) {
			at = now
		}
		at = at.Add(s.t.ErrorSleep)
	}
	if len(lines) > 0 && (lines[0][0] == '4' || lines[0][0] == '5') && lines[0] != tooManyRcpts {
		s.errors++
	}
	if s.t.ReputationDelay > 0 && s.ip != "" && s.h.isBad(s.ip, s.t.ReputationAfter) {
		// A client with a bad reputation: every reply waits.
		s.h.slowed.Add(1)
		if now := time.Now(); at.Before(now) {
			at = now
		}
		at = at.Add(s.t.ReputationDelay)
	}
	throttled := s.t.BadRcptThrottle > 0 && s.refused >= s.t.BadRcptThrottle
	if throttled {
		// The bad-recipient throttle sleeps before every reply; without
		// WholeGroups it sends what it has before it sleeps, and each
		// reply it slept for at once.
		s.h.slowed.Add(1)
		if !s.t.WholeGroups && !s.flush() {
			return false
		}
		if now := time.Now(); at.Before(now) {
			at = now
		}
		at = at.Add(s.t.BadRcptSleep)
	}
	if len(lines) > 0 && strings.HasPrefix(lines[0], "421") {
		s.h.sent421.Add(1)
	}
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.w.done:
			t.Stop()
			return false
		}
	}
	for _, l := range lines {
		s.bw.WriteString(l)
		s.bw.WriteString("\r\n")
	}
	if held || (throttled && !s.t.WholeGroups) {
		// Postfix flushes a reply it slept for, pipelined or not.
		return s.flush()
	}
	return true
}

// latency is the round trip to the host.
func (s *session) latency() time.Duration {
	if s.t.Latency > 0 {
		return s.t.Latency
	}
	return s.w.opts.Latency
}

// pause holds the next reply d longer than it would have left: the server
// is busy before it answers (later pipelined replies wait behind it).
func (s *session) pause(d time.Duration) {
	rtt := s.latency()
	at := s.arrived.Add(rtt)
	if now := time.Now(); at.Before(now) {
		at = now
	}
	s.arrived = at.Add(d - rtt)
}

func (s *session) flush() bool {
	if s.bw.Buffered() == 0 {
		return true
	}
	s.c.SetWriteDeadline(time.Now().Add(s.w.opts.IdleTimeout))
	return s.bw.Flush() == nil
}
