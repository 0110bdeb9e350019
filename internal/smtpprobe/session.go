package smtpprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/proxypool"
)

// session is one SMTP connection to an MX host. It is used by one
// goroutine at a time.
type session struct {
	p      *Prober
	tg     target
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	budget time.Time // caller deadline bounding the current exchange; zero: none
	t0     time.Time

	pipelining, smtputf8 bool
	used                 bool          // a transaction was sent: RSET before the next
	rcpts                int           // RCPTs sent in this session
	rejects, rejectCap   int           // rejections so far; their budget (0: none)
	verdicts             int           // RCPT replies received after an accepted MAIL
	setup                time.Duration // connect to end of EHLO
	rtt                  time.Duration // last exchange's round trip
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

func isBudget(err error) bool {
	var be *budgetError
	return errors.As(err, &be)
}

// proxyLostError marks a session lost because its SOCKS proxy died: the
// mail server is not to blame, and the items go back as they were.
type proxyLostError struct{ err error }

func (e *proxyLostError) Error() string { return "smtpprobe: proxy lost: " + e.err.Error() }
func (e *proxyLostError) Unwrap() error { return e.err }

func isProxyLost(err error) bool {
	var pl *proxyLostError
	return errors.As(err, &pl)
}

// noRoute reports a dial failure that is nobody's answer about the host:
// no proxy is available.
func noRoute(err error) bool { return errors.Is(err, proxypool.ErrNoProxy) }

// ctxErr is ctx's error, or DeadlineExceeded once the deadline has passed
// even if ctx has not noticed yet.
func ctxErr(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// allowed applies Config.AllowAddr to a target.
func (p *Prober) allowed(tg target) error {
	if p.cfg.AllowAddr == nil {
		return nil
	}
	ip, err := netip.ParseAddr(tg.ip)
	if err == nil {
		err = p.cfg.AllowAddr(ip)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotAllowed, tg.ip, err)
	}
	return nil
}

// dial connects, reads the greeting and says EHLO (HELO if EHLO is
// refused). Errors are *budgetError (the deadline) or *hostError. A host
// whose connect timed out or was refused, or that sent no greeting within
// GreetingTimeout, is penalised (see Config.HostPenaltyTTL); one that gets
// as far as a usable session is forgiven.
func (p *Prober) dial(tg target, budget time.Time) (*session, error) {
	if err := p.allowed(tg); err != nil {
		return nil, &hostError{tg: tg, err: err}
	}
	if !budget.IsZero() && !time.Now().Before(budget) {
		return nil, &budgetError{context.DeadlineExceeded}
	}
	t0 := time.Now()
	p.st.dials.Add(1)
	ctx := context.Background()
	if !budget.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, budget)
		defer cancel()
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	c, err := p.cfg.Dialer(dctx, "tcp", tg.addr)
	connectTimedOut := dctx.Err() != nil
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, &budgetError{fmt.Errorf("%w: %w", context.DeadlineExceeded, err)}
		}
		if noRoute(err) {
			return nil, err
		}
		if connectTimedOut {
			err = fmt.Errorf("%w: %w", errConnectTimeout, err)
			p.stalled(tg, t0, err)
		} else if unreachable(err) {
			p.penalties.mark(tg.addr, err)
		}
		return nil, &hostError{tg: tg, err: err}
	}
	s := &session{
		p: p, tg: tg, c: c, budget: budget, t0: t0,
		br: bufio.NewReaderSize(c, maxReplyLine),
		bw: bufio.NewWriterSize(c, 2048),
	}
	if err := s.hello(); err != nil {
		if !isBudget(err) && errors.Is(err, os.ErrDeadlineExceeded) && s.lastReply.code == 0 {
			// No greeting in time: a tarpit, not worth another wait for a while.
			p.stalled(tg, t0, err)
		}
		s.close()
		return nil, err
	}
	p.penalties.clear(tg.addr)
	s.setup = time.Since(t0)
	p.st.setupHist.Observe(s.setup)
	p.st.sessions.Add(1)
	p.noteSession(tg.addr, t0)
	return s, nil
}

// stalled records a host that never answered.
func (p *Prober) stalled(tg target, t0 time.Time, err error) {
	p.st.stalled.Add(1)
	p.st.stalledNs.Add(int64(time.Since(t0)))
	p.penalties.mark(tg.addr, err)
}

// arm sets the connection deadline for the next exchange: d from now, cut
// by the budget.
func (s *session) arm(d time.Duration) error {
	dl := time.Now().Add(d)
	if !s.budget.IsZero() {
		if !time.Now().Before(s.budget) {
			return &budgetError{context.DeadlineExceeded}
		}
		if s.budget.Before(dl) {
			dl = s.budget
		}
	}
	return s.c.SetDeadline(dl)
}

// fail classifies an I/O error of the session: the caller's deadline, or
// the host.
func (s *session) fail(err error) error {
	s.broken = true
	if isBudget(err) || isProxyLost(err) {
		return err
	}
	if pc, ok := s.c.(interface{ ProxyLost() bool }); ok && pc.ProxyLost() {
		s.p.st.failovers.Add(1)
		return &proxyLostError{err}
	}
	if !s.budget.IsZero() && !time.Now().Before(s.budget) {
		return &budgetError{fmt.Errorf("%w: %w", context.DeadlineExceeded, err)}
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

// exchange1 sends one command and reads its reply within CommandTimeout.
func (s *session) exchange1(cmd string) (reply, error) {
	if err := s.arm(s.p.cfg.CommandTimeout); err != nil {
		return reply{}, s.fail(err)
	}
	s.bw.WriteString(cmd)
	s.bw.WriteString("\r\n")
	if err := s.bw.Flush(); err != nil {
		return reply{}, s.fail(err)
	}
	return s.read()
}

func (s *session) hello() error {
	if err := s.arm(s.p.cfg.GreetingTimeout); err != nil {
		return s.fail(err)
	}
	g, err := s.read()
	if err != nil {
		return err
	}
	if g.code != 220 {
		return &hostError{tg: s.tg, reply: g}
	}
	if strings.Contains(strings.ToLower(g.text), "postfix") {
		s.rejectCap = s.p.cfg.MaxRejectsPerSession
	}
	r, err := s.exchange1("EHLO " + s.p.cfg.HELOName)
	if err != nil {
		return err
	}
	if r.class() == 2 {
		for _, l := range strings.Split(r.text, "\n")[1:] {
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
	if r.code == 421 {
		return &hostError{tg: s.tg, reply: r}
	}
	if r, err = s.exchange1("HELO " + s.p.cfg.HELOName); err != nil {
		return err
	}
	if r.class() != 2 {
		return &hostError{tg: s.tg, reply: r}
	}
	return nil
}

// rejectRoom is the number of rejections the session may still get.
func (s *session) rejectRoom() int {
	if s.rejectCap <= 0 {
		return math.MaxInt
	}
	return s.rejectCap - s.rejects
}

// depth is the number of transactions per round trip.
func (s *session) depth() int {
	if s.pipelining {
		return s.p.cfg.PipelineDepth
	}
	return 1
}

// slowedError: a server began holding back its replies after the session
// had made some errors (Postfix's smtpd_soft_error_limit with a banner
// that does not say Postfix). The session is dropped at once.
type slowedError struct{ rejects int }

func (e *slowedError) Error() string {
	return fmt.Sprintf("smtpprobe: server slowed its replies down after %d rejections in the session", e.rejects)
}

// slowReplyGap is a pause between two pipelined replies long enough to
// mean a server holds replies back on purpose (Postfix: a second).
const slowReplyGap = 700 * time.Millisecond

// minRejectsBeforeSlow: fewer rejections than this do not explain a slow
// reply (a slow lookup at the server might).
const minRejectsBeforeSlow = 3

// txReply holds the replies of one transaction.
type txReply struct {
	mail, rcpt reply
	pos        int // the RCPT's number in the session (1-based)
}

func (s *session) mailCmd(rcpt string) string {
	from := "MAIL FROM:" + s.p.mailFrom
	if !isASCII(rcpt) {
		from += " SMTPUTF8"
	}
	return from
}

// transactions runs [RSET,] MAIL FROM, RCPT TO for each recipient, all in
// one write when the server offers PIPELINING (RFC 2920 lets a client
// pipeline RSET, MAIL and RCPT), and reads the replies. It returns how many
// transactions got all their replies; on error the rest did not.
func (s *session) transactions(rcpts []string, out []txReply) (int, error) {
	if !s.pipelining {
		for i, r := range rcpts {
			if err := s.transaction1(r, &out[i]); err != nil {
				return i, err
			}
		}
		return len(rcpts), nil
	}
	if err := s.arm(s.p.cfg.CommandTimeout); err != nil {
		return 0, s.fail(err)
	}
	t0 := time.Now()
	rset := make([]bool, len(rcpts))
	for i, r := range rcpts {
		if s.used {
			s.bw.WriteString("RSET\r\n")
			s.p.st.rsets.Add(1)
			rset[i] = true
		}
		s.used = true
		s.bw.WriteString(s.mailCmd(r))
		s.bw.WriteString("\r\nRCPT TO:<")
		s.bw.WriteString(r)
		s.bw.WriteString(">\r\n")
		s.rcpts++
		s.p.st.rcpts.Add(1)
		out[i].pos = s.rcpts
	}
	if err := s.bw.Flush(); err != nil {
		return 0, s.fail(err)
	}
	if n, err := s.readReplies(rset, out); err != nil {
		return n, err
	}
	s.rtt = time.Since(t0)
	return len(rcpts), nil
}

// readReplies reads the replies of a pipelined window ([RSET,] MAIL, RCPT
// per transaction) into out and returns how many transactions got all of
// theirs. It gives up at once when the server starts holding replies back.
func (s *session) readReplies(rset []bool, out []txReply) (int, error) {
	var w slowWatch
	for i := range out {
		if rset[i] {
			r, err := s.read()
			if err != nil {
				return i, err
			}
			if err := w.check(s); err != nil {
				return i, err
			}
			if r.class() != 2 {
				s.broken = true
				return i, &hostError{tg: s.tg, reply: r, err: fmt.Errorf("%w: RSET refused", errProtocol)}
			}
		}
		var err error
		if out[i].mail, err = s.read(); err != nil {
			return i, err
		}
		if err := w.check(s); err != nil {
			return i, err
		}
		if out[i].rcpt, err = s.read(); err != nil {
			return i, err
		}
		if err := w.check(s); err != nil {
			return i, err
		}
		s.countRejection(out[i])
	}
	return len(out), nil
}

// countRejection counts a transaction refused at MAIL or RCPT against the
// session's rejection budget.
func (s *session) countRejection(r txReply) {
	if r.mail.class() != 2 || r.rcpt.class() != 2 {
		s.rejects++
	}
}

// slowWatch notices a server that starts holding its replies back: a
// reply slowReplyGap after the one before, once the session has made
// enough errors to explain it.
type slowWatch struct{ prev time.Time }

func (w *slowWatch) check(s *session) error {
	now := time.Now()
	gap, first := now.Sub(w.prev), w.prev.IsZero()
	w.prev = now
	if first || gap < slowReplyGap || s.rejects < minRejectsBeforeSlow {
		return nil
	}
	s.broken = true
	return &slowedError{rejects: s.rejects}
}

// transaction1 runs one transaction a command at a time (no PIPELINING):
// RCPT is not sent when RSET or MAIL is refused.
func (s *session) transaction1(rcpt string, out *txReply) error {
	t0 := time.Now()
	if s.used {
		s.p.st.rsets.Add(1)
		r, err := s.exchange1("RSET")
		if err != nil {
			return err
		}
		if r.class() != 2 {
			s.broken = true
			return &hostError{tg: s.tg, reply: r, err: fmt.Errorf("%w: RSET refused", errProtocol)}
		}
	}
	s.used = true
	var err error
	if out.mail, err = s.exchange1(s.mailCmd(rcpt)); err != nil {
		return err
	}
	if out.mail.class() != 2 {
		out.rcpt = reply{code: 503, last: "503 (not sent)"}
		s.countRejection(*out)
		return nil
	}
	s.rcpts++
	s.p.st.rcpts.Add(1)
	out.pos = s.rcpts
	if out.rcpt, err = s.exchange1("RCPT TO:<" + rcpt + ">"); err != nil {
		return err
	}
	s.countRejection(*out)
	s.rtt = time.Since(t0)
	return nil
}

// end closes the session: QUIT unless it is broken.
func (s *session) end() {
	if s.broken {
		s.close()
		return
	}
	s.quit()
}

// quit ends the session politely (QUIT, read 221, wait for the server to
// close, all bounded), closes the connection.
func (s *session) quit() {
	s.budget = time.Time{}
	if s.arm(min(s.p.cfg.CommandTimeout, quitTimeout)) == nil {
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
	s.c.Close()
	d := time.Since(s.t0)
	s.p.st.sessionNs.Add(int64(d))
	s.p.st.sessionHist.Observe(d)
}
