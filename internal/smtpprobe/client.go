package smtpprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

const (
	maxReplyLine  = 4096 // longest reply line accepted (RFC 5321: 512)
	maxReplyLines = 100  // lines in one multi-line reply
	quitTimeout   = 500 * time.Millisecond
)

// errProtocol marks replies that are not SMTP.
var errProtocol = errors.New("smtpprobe: malformed SMTP reply")

// reply is one SMTP reply, possibly multi-line.
type reply struct {
	code int    // 3-digit reply code
	enh  string // enhanced status code (RFC 3463) of the first line, "" if none
	text string // text of all lines joined by "\n", codes removed
	last string // last line as received, CRLF removed
}

func (r reply) class() int { return r.code / 100 }

// String returns the last line, which is what Result.Reply reports.
func (r reply) String() string { return r.last }

// parseEnhanced returns the enhanced status code at the start of text
// (class.subject.detail, class 2, 4 or 5, 1 to 3 digits each) if its class
// agrees with the reply code.
func parseEnhanced(code int, text string) string {
	end := strings.IndexByte(text, ' ')
	if end < 0 {
		end = len(text)
	}
	s := text[:end]
	if len(s) < 5 || s[0] != byte('0'+code/100) || s[1] != '.' {
		return ""
	}
	parts := strings.Split(s[2:], ".")
	if len(parts) != 2 {
		return ""
	}
	for _, p := range parts {
		if len(p) < 1 || len(p) > 3 {
			return ""
		}
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return ""
			}
		}
	}
	return s
}

// readReply reads one (multi-line) reply from br.
func readReply(br *bufio.Reader) (reply, error) {
	var r reply
	var text strings.Builder
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return r, fmt.Errorf("%w: line longer than %d bytes", errProtocol, maxReplyLine)
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return r, err
		}
		l := strings.TrimRight(string(line), "\r\n")
		if len(l) < 3 || !digit(l[0]) || !digit(l[1]) || !digit(l[2]) || l[0] < '1' || l[0] > '5' {
			return r, fmt.Errorf("%w: %q", errProtocol, truncate(l, 64))
		}
		code := int(l[0]-'0')*100 + int(l[1]-'0')*10 + int(l[2]-'0')
		sep := byte(' ')
		body := ""
		if len(l) > 3 {
			sep, body = l[3], l[4:]
			if sep != ' ' && sep != '-' {
				return r, fmt.Errorf("%w: %q", errProtocol, truncate(l, 64))
			}
		}
		if n == 0 {
			r.code = code
			r.enh = parseEnhanced(code, body)
		} else {
			if code != r.code {
				return r, fmt.Errorf("%w: code %d inside a %d reply", errProtocol, code, r.code)
			}
			text.WriteByte('\n')
		}
		text.WriteString(body)
		r.last = l
		if sep == ' ' {
			r.text = text.String()
			return r, nil
		}
		if n+1 >= maxReplyLines {
			return r, fmt.Errorf("%w: more than %d lines", errProtocol, maxReplyLines)
		}
	}
}

func digit(c byte) bool { return '0' <= c && c <= '9' }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// target is one MX host address to connect to.
type target struct {
	host string // MX host name
	addr string // ip:port
}

// session is one SMTP connection to an MX host.
type session struct {
	p      *Prober
	ctx    context.Context
	tg     target
	hostIx int
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer

	mu        sync.Mutex // guards cancelled and deadline updates
	cancelled bool
	stopAfter func() bool
	release   func()

	pipelining, smtputf8 bool
	inTx                 bool
	rcpts                int           // RCPTs sent in this session
	verdicts             int           // RCPT replies received
	setup                time.Duration // connect to end of EHLO
	rtt                  time.Duration // last transaction's round trip
	broken               bool          // I/O failed: close without QUIT
	lastReply            reply         // last reply read (for failures)
}

// hostError is a failure to get a usable session from one host.
type hostError struct {
	tg    target
	reply reply // the refusing reply, if any
	err   error
}

func (e *hostError) Error() string {
	if e.err != nil {
		return e.tg.host + " (" + e.tg.addr + "): " + e.err.Error()
	}
	return e.tg.host + " (" + e.tg.addr + "): " + e.reply.last
}

func (e *hostError) Unwrap() error { return e.err }

// budgetError marks a failure caused by the caller's context (cancelled,
// past its deadline, or a per-host wait that cannot end before it).
type budgetError struct{ err error }

func (e *budgetError) Error() string { return "smtpprobe: " + fmt.Sprint(e.err) }
func (e *budgetError) Unwrap() error { return e.err }

// ctxOver reports whether ctx is done or its deadline has passed (a
// connection deadline set from it can fire a hair before ctx.Err is set).
func ctxOver(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// ctxErr is ctx's error, or DeadlineExceeded once the deadline has passed
// even if ctx has not noticed yet.
func ctxErr(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// dial acquires the host's slot and rate token, connects, reads the
// greeting and says EHLO (HELO if EHLO is refused). Errors are
// *budgetError (ctx) or *hostError (the host). A host whose connect timed
// out or was refused, or that sent no greeting within CommandTimeout, is
// penalised (see Config.HostPenaltyTTL); one that gets as far as a usable
// session is forgiven.
func (p *Prober) dial(ctx context.Context, tg target, hostIx int) (*session, error) {
	release, err := p.limits.acquire(ctx, tg.addr)
	if err != nil {
		return nil, &budgetError{err}
	}
	t0 := time.Now()
	p.dials.Add(1)
	dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	c, err := p.cfg.Dialer(dctx, "tcp", tg.addr)
	connectTimedOut := dctx.Err() != nil
	cancel()
	if err != nil {
		release()
		if ctxOver(ctx) {
			return nil, &budgetError{fmt.Errorf("%w: %w", ctxErr(ctx), err)}
		}
		if connectTimedOut || unreachable(err) {
			p.penalties.mark(tg.addr, err)
		}
		return nil, &hostError{tg: tg, err: err}
	}
	s := &session{
		p: p, ctx: ctx, tg: tg, hostIx: hostIx, c: c, release: release,
		br: bufio.NewReaderSize(c, maxReplyLine),
		bw: bufio.NewWriterSize(c, 1024),
	}
	s.stopAfter = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cancelled = true
		c.SetDeadline(time.Unix(1, 0))
		s.mu.Unlock()
	})
	if err := s.hello(); err != nil {
		s.close()
		return nil, err
	}
	p.penalties.clear(tg.addr)
	s.setup = time.Since(t0)
	p.sessions.Add(1)
	return s, nil
}

// arm sets the connection deadline for the next exchange: d from now, cut
// by ctx's deadline.
func (s *session) arm(d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelled {
		return s.ctx.Err()
	}
	dl := time.Now().Add(d)
	if cd, ok := s.ctx.Deadline(); ok && cd.Before(dl) {
		dl = cd
	}
	return s.c.SetDeadline(dl)
}

// fail classifies an I/O error of the session: the caller's context, or
// the host.
func (s *session) fail(err error) error {
	s.broken = true
	if ctxOver(s.ctx) {
		return &budgetError{fmt.Errorf("%w: %w", ctxErr(s.ctx), err)}
	}
	return &hostError{tg: s.tg, err: err, reply: s.lastReply}
}

func (s *session) read() (reply, error) {
	r, err := readReply(s.br)
	if err != nil {
		return r, s.fail(err)
	}
	s.lastReply = r
	return r, nil
}

// exchange sends cmds (pipelined in one write) and reads one reply per
// command, all within one CommandTimeout.
func (s *session) exchange(replies []reply, cmds ...string) error {
	if err := s.arm(s.p.cfg.CommandTimeout); err != nil {
		return s.fail(err)
	}
	for _, c := range cmds {
		s.bw.WriteString(c)
		s.bw.WriteString("\r\n")
	}
	if err := s.bw.Flush(); err != nil {
		return s.fail(err)
	}
	for i := range cmds {
		r, err := s.read()
		if err != nil {
			return err
		}
		replies[i] = r
	}
	return nil
}

func (s *session) hello() error {
	if err := s.arm(s.p.cfg.CommandTimeout); err != nil {
		return s.fail(err)
	}
	g, err := s.read()
	if err != nil {
		// No greeting within CommandTimeout (with ctx still live): a
		// tarpit, not worth another wait for a while.
		if !isBudget(err) && errors.Is(err, os.ErrDeadlineExceeded) {
			s.p.penalties.mark(s.tg.addr, err)
		}
		return err
	}
	if g.code != 220 {
		return &hostError{tg: s.tg, reply: g}
	}
	var r [1]reply
	if err := s.exchange(r[:], "EHLO "+s.p.cfg.HELOName); err != nil {
		return err
	}
	if r[0].class() == 2 {
		for _, l := range strings.Split(r[0].text, "\n")[1:] {
			kw, _, _ := strings.Cut(strings.ToUpper(strings.TrimSpace(l)), " ")
			switch kw {
			case "PIPELINING":
				s.pipelining = true
			case "SMTPUTF8":
				s.smtputf8 = true
			}
		}
		return nil
	}
	if r[0].code == 421 {
		return &hostError{tg: s.tg, reply: r[0]}
	}
	if err := s.exchange(r[:], "HELO "+s.p.cfg.HELOName); err != nil {
		return err
	}
	if r[0].class() != 2 {
		return &hostError{tg: s.tg, reply: r[0]}
	}
	return nil
}

// transaction runs [RSET,] MAIL FROM, RCPT TO for one recipient (pipelined
// when offered) and returns the MAIL and RCPT replies. The RCPT reply is
// meaningless unless MAIL got a 2xx.
func (s *session) transaction(rcpt string) (mail, rc reply, err error) {
	from := "MAIL FROM:" + s.p.mailFrom
	if !isASCII(rcpt) {
		from += " SMTPUTF8"
	}
	cmds := make([]string, 0, 3)
	if s.inTx {
		cmds = append(cmds, "RSET")
		s.p.rsets.Add(1)
	}
	cmds = append(cmds, from, "RCPT TO:<"+rcpt+">")
	var rs [3]reply
	t0 := time.Now()
	s.rcpts++
	s.p.rcpts.Add(1)
	if s.pipelining {
		err = s.exchange(rs[:], cmds...)
	} else {
		for i, c := range cmds {
			if err = s.exchange(rs[i:i+1], c); err != nil {
				break
			}
			if i < len(cmds)-1 && rs[i].class() != 2 {
				// RSET or MAIL refused: do not send RCPT.
				rs[len(cmds)-1] = reply{code: 503, last: "503 (not sent)"}
				break
			}
		}
	}
	if err != nil {
		return reply{}, reply{}, err
	}
	s.rtt = time.Since(t0)
	if len(cmds) == 3 {
		if rs[0].class() != 2 {
			s.broken = true
			return reply{}, reply{}, &hostError{tg: s.tg, reply: rs[0], err: fmt.Errorf("%w: RSET refused", errProtocol)}
		}
		rs[0], rs[1] = rs[1], rs[2]
	}
	mail, rc = rs[0], rs[1]
	s.inTx = mail.class() == 2
	if s.inTx {
		s.verdicts++
	}
	return mail, rc, nil
}

// quit ends the session politely (QUIT, read 221, wait for the server to
// close, all bounded) unless it is broken, closes the connection and frees
// the host slot.
func (s *session) quit() {
	if !s.broken && s.arm(min(s.p.cfg.CommandTimeout, quitTimeout)) == nil {
		s.bw.WriteString("QUIT\r\n")
		if s.bw.Flush() == nil {
			if _, err := readReply(s.br); err == nil {
				// Let the server close first: its side of the connection is
				// gone when the slot is handed to the next session.
				io.Copy(io.Discard, io.LimitReader(s.br, 64<<10))
			}
		}
	}
	s.close()
}

func (s *session) close() {
	s.stopAfter()
	s.c.Close()
	s.release()
}
