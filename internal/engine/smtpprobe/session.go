package smtpprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/proxypool"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// session is one SMTP connection to an MX host. It is used by one
// goroutine at a time.
type session struct {
	p      *Prober
	tg     target
	c      net.Conn
	in     *countReader // bytes the server sent
	br     *bufio.Reader
	bw     *bufio.Writer
	budget time.Time // caller deadline bounding the current exchange; zero: none
	t0     time.Time
	marked time.Time // the last reply counted in hostQ.busy

	kind                 serverKind
	rules                serverRules
	pipelining, smtputf8 bool
	inTx                 bool          // a MAIL was sent and no RSET since: RSET before the next MAIL
	txUTF8               bool          // the open transaction's MAIL carried SMTPUTF8
	txQueued             bool          // an RCPT of the open transaction was accepted (the server opened its queue file)
	txRcpts              int           // RCPTs sent in the open transaction
	txSafe, txStep       int           // a window takes a transaction at most txStep RCPTs past txSafe (0: no bound; see txPlanLocked)
	probeTx              bool          // a 452 ended the first transaction: try one RCPT in the next before trusting it
	rcpts                int           // RCPTs sent in this session
	answered             int           // RCPT replies other than "too many recipients"
	rejects, rejectCap   int           // rejections so far; their budget (0: none)
	slowZone             bool          // rejectCap takes the session past the host's quiet budget (see cost.go)
	unslotted            bool          // it sleeps through the host's errors without a global slot (sleepOnLocked)
	errorSleep           time.Duration // the host's sleep before each reply past it
	slowUntil            time.Time     // the cost model's plan ends the session by then (zero: no plan)
	retrying             bool          // it sent an address again after a 4xx (greylisting)
	txRejects, txRejCap  int           // refused RCPTs in the open transaction; their budget (0: none, see HostState.RejectsPerTransaction)
	group                int           // RCPTs a round trip (the host's group, see Config.PipelineStart)
	helloRTT             time.Duration // EHLO's round trip: a reply that costs the server nothing
	exempt               int           // the last window's replies a server may pause before (flow control)
	nonmail, nonmailCap  int           // non-mail commands sent after EHLO (RSET, HELO); their budget
	verdicts             int           // RCPT replies received in an accepted transaction
	setup                time.Duration // connect to end of EHLO
	rtt                  time.Duration // last exchange's round trip
	broken               bool          // I/O failed or the server is closing: close without QUIT
	lastReply            reply         // last reply read (for failures)
	egress               string        // the egress identity it leaves from
	repReserved          int           // unknown recipients it may still send before its identity is slowed (reputation.go)
	repClean             bool          // it left from an identity with room at the host (reputation.go)
	repQuitting          bool          // its identity's room is spent: it waits for its QUIT's reply
	groupCap             int           // at most this many RCPTs a round trip (0: the group's; reputation.go)
	slowQuit             time.Duration // the host delays QUIT's reply this long on purpose (reputation.go)

	lease     *fleet.Lease  // the connection slot (see hold)
	leaseStop chan struct{} // closed when the connection is
	cutAt     atomic.Int64  // unix ns after which no I/O may go on (the lease ended); 0: none
}

// leaseMargin is the least time left on a lease worth another exchange.
const leaseMargin = time.Second

// hold ties the session to its connection slot: it is released when the
// connection is closed, and once it is lost (or its deadline passes) the
// connection is cut at once: other processes may have the slot within the
// lease TTL. What was in flight goes back to the queue (slotLostError),
// and the host is not blamed.
func (s *session) hold(l *fleet.Lease) {
	s.lease = l
	s.leaseStop = make(chan struct{})
	dl, ok := l.Deadline()
	go func() {
		var at <-chan time.Time
		if ok {
			t := s.p.clk.NewTimer(s.p.clk.Until(dl))
			defer t.Stop()
			at = t.C()
		}
		select {
		case <-s.leaseStop:
			return
		case <-l.Lost():
		case <-at:
		}
		cut := s.p.clk.Now()
		s.cutAt.Store(cut.UnixNano())
		_ = s.c.SetDeadline(cut)
	}()
}

// leaseEnding reports whether the session must end now rather than take
// more work: its lease is lost or about to run out.
func (s *session) leaseEnding() bool {
	if s.lease == nil {
		return false
	}
	if s.cutAt.Load() != 0 {
		return true
	}
	select {
	case <-s.lease.Lost():
		return true
	default:
	}
	dl, ok := s.lease.Deadline()
	return ok && s.p.clk.Until(dl) < max(leaseMargin, 2*s.rtt)
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
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

// refusalError: the host asked to slow down. It answered 421 or another
// 4xx to the greeting, EHLO, MAIL or RSET, or refused, reset or dropped a
// connection (or let it time out) after it had answered before. Nothing in
// it is an address's verdict: the addresses wait for the host's backoff.
type refusalError struct {
	tg    target
	reply reply // the refusing reply; code 0 for a refused or dropped connection
	err   error
	// beside: for a connection refused at its greeting, our other
	// connections to the host when it was dialled (they may have closed
	// by the time the refusal is read: see lowerLocked).
	beside int
}

func (e *refusalError) Error() string {
	msg := e.reply.last
	if e.err != nil {
		msg = e.err.Error()
	}
	return "smtpprobe: " + e.tg.host + " (" + e.tg.addr + ") asked to slow down: " + msg
}

func (e *refusalError) Unwrap() error { return e.err }

// errNoAnswer marks a connection the server closed (or reset) before
// sending a byte: on first contact, a host that never answered (a tarpit
// that hangs up), like one whose greeting never came.
var errNoAnswer = errors.New("connection closed before the server sent a byte")

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

// isProxyLost reports a session lost through no fault of the host: its
// proxy died, or its connection slot was lost (slotLostError).
func isProxyLost(err error) bool {
	var pl *proxyLostError
	var sl *slotLostError
	return errors.As(err, &pl) || errors.As(err, &sl)
}

// slotLostError marks a session cut because its connection slot was lost
// (the fleet backend went away or restarted) or ran out (a divided turn).
type slotLostError struct{ err error }

func (e *slotLostError) Error() string { return "smtpprobe: connection slot lost: " + e.err.Error() }
func (e *slotLostError) Unwrap() error { return e.err }

// noRoute reports a dial failure that is nobody's answer about the host:
// no proxy is available.
func noRoute(err error) bool { return errors.Is(err, proxypool.ErrNoProxy) }

// ctxErr is ctx's error, or DeadlineExceeded once the deadline has passed
// even if ctx has not noticed yet.
func ctxErr(ctx context.Context, clk clock.Clock) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !clk.Now().Before(dl) {
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
// refused). Errors are *budgetError (the deadline), *refusalError (the host
// asks to slow down) or *hostError. On first contact (answered false), a
// host whose connect timed out or was refused, or that sent no byte before
// its greeting was due or it closed the connection, is penalised (see
// Config.HostPenaltyTTL); the same at a host that has answered before is
// a refusal. A host that gets as far as a usable session is forgiven.
func (p *Prober) dial(tg target, budget time.Time, answered bool, dialer DialFunc) (*session, error) {
	if err := p.allowed(tg); err != nil {
		return nil, &hostError{tg: tg, err: err}
	}
	if !budget.IsZero() && !p.clk.Now().Before(budget) {
		return nil, &budgetError{context.DeadlineExceeded}
	}
	t0 := p.clk.Now()
	p.st.dials.Add(1)
	ctx := context.Background()
	if !budget.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, budget)
		defer cancel()
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	c, err := dialer(dctx, "tcp", tg.addr)
	connectTimedOut := dctx.Err() != nil
	cancel()
	if err != nil {
		return nil, p.connectFailed(tg, t0, ctx, err, connectTimedOut, answered)
	}
	in := &countReader{r: c}
	s := &session{
		p: p, tg: tg, c: c, in: in, budget: budget, t0: t0,
		br: bufio.NewReaderSize(in, maxReplyLine),
		bw: bufio.NewWriterSize(c, 4096),
	}
	if err := s.hello(); err != nil {
		s.close()
		return nil, p.helloFailed(s, t0, err, answered)
	}
	p.penalties.clear(tg.addr)
	s.setup = p.clk.Since(t0)
	p.st.setupHist.Observe(s.setup)
	p.st.sessions.Add(1)
	p.noteSession(tg.addr, t0)
	return s, nil
}

// connectFailed classifies a failed connect.
func (p *Prober) connectFailed(tg target, t0 time.Time, ctx context.Context, err error, timedOut, answered bool) error {
	switch {
	case ctx.Err() != nil:
		return &budgetError{fmt.Errorf("%w: %w", context.DeadlineExceeded, err)}
	case noRoute(err):
		return err
	case errors.Is(err, proxypool.ErrProxyFailed):
		p.st.failovers.Add(1)
		return &proxyLostError{err} // another route next time
	case timedOut:
		err = fmt.Errorf("%w: %w", errConnectTimeout, err)
	}
	if answered && (timedOut || unreachable(err) || errors.Is(err, syscall.ECONNRESET)) {
		// It answered before: busy (a full backlog, a firewall's rate
		// limit), not dead.
		return &refusalError{tg: tg, err: err}
	}
	if timedOut {
		p.stalled(tg, t0, err)
	} else if unreachable(err) {
		p.penalties.mark(tg.addr, err)
	}
	return &hostError{tg: tg, err: err}
}

// helloFailed classifies a failed greeting or EHLO/HELO.
func (p *Prober) helloFailed(s *session, t0 time.Time, err error, answered bool) error {
	if isBudget(err) || isProxyLost(err) || s.in.n > 0 {
		return err
	}
	// Not a byte from the server, however the connection ended: its
	// greeting timeout ran out, it closed or reset the connection before,
	// at or after that moment.
	err = fmt.Errorf("%w: %w", errNoAnswer, err)
	if answered {
		return &refusalError{tg: s.tg, err: err}
	}
	err = &hostError{tg: s.tg, err: err}
	p.stalled(s.tg, t0, err)
	return err
}

// stalled records a host that never answered.
func (p *Prober) stalled(tg target, t0 time.Time, err error) {
	p.st.stalled.Add(1)
	p.st.stalledNs.Add(int64(p.clk.Since(t0)))
	p.penalties.mark(tg.addr, err)
}

// arm sets the connection deadline for the next exchange: d from now, cut
// by the budget.
func (s *session) arm(d time.Duration) error {
	dl := s.p.clk.Now().Add(d)
	if c := s.cutAt.Load(); c != 0 && time.Unix(0, c).Before(dl) {
		dl = time.Unix(0, c)
	}
	if !s.budget.IsZero() {
		if !s.p.clk.Now().Before(s.budget) {
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
	if s.cutAt.Load() != 0 {
		return &slotLostError{err}
	}
	if pc, ok := s.c.(interface{ ProxyLost() bool }); ok && pc.ProxyLost() {
		s.p.st.failovers.Add(1)
		return &proxyLostError{err}
	}
	if !s.budget.IsZero() && !s.p.clk.Now().Before(s.budget) {
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
	switch greetingClass(g, true).Rule().Next {
	case NextSlowDown:
		return &refusalError{tg: s.tg, reply: g}
	case NextOtherHost:
		return &hostError{tg: s.tg, reply: g}
	}
	s.kind = recognise(g.text)
	s.rules = rulesFor(s.kind)
	s.nonmailCap = s.rules.nonmail
	if s.rules.rejects {
		s.rejectCap = s.p.cfg.MaxRejectsPerSession
	}
	t0 := s.p.clk.Now()
	r, err := s.exchange1("EHLO " + s.p.cfg.HELOName)
	if err != nil {
		return err
	}
	s.helloRTT = s.p.clk.Since(t0)
	switch greetingClass(r, false).Rule().Next {
	case NextGoOn:
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
	case NextSlowDown:
		return &refusalError{tg: s.tg, reply: r}
	}
	s.nonmail++ // EHLO refused: HELO, a second one that counts for Exim
	if r, err = s.exchange1("HELO " + s.p.cfg.HELOName); err != nil {
		return err
	}
	switch greetingClass(r, false).Rule().Next {
	case NextGoOn:
		return nil
	case NextSlowDown:
		return &refusalError{tg: s.tg, reply: r}
	}
	return &hostError{tg: s.tg, reply: r}
}

// end closes the session: QUIT unless it is broken.
func (s *session) end() {
	switch {
	case s.broken:
		s.close()
	case s.slowQuit > 0:
		// Its identity's reputation at the host is spent (reputation.go):
		// the 221 waits the host's delay; wait for it, so that the host's
		// process is gone when its slot goes to the next session.
		s.quit(s.slowQuit + quitTimeout)
	case s.slowZone || (s.rules.rejects && s.rejects >= postfixSoftErrors):
		// A Postfix session in its slow zone (see fitSessionLocked)
		// sleeps a second before answering QUIT (or noticing a closed
		// connection): wait for it, so that its process is gone when the
		// host's slot goes to the next session.
		s.quit(max(s.errorSleep, postfixErrorSleep) + quitTimeout)
	default:
		s.quit(quitTimeout)
	}
}

// quit ends the session politely (QUIT, read 221, wait for the server to
// close, all within wait), closes the connection.
func (s *session) quit(wait time.Duration) {
	s.budget = time.Time{}
	if s.arm(min(s.p.cfg.CommandTimeout, wait)) == nil {
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
	if s.lease != nil {
		close(s.leaseStop)
		s.lease.Release()
	}
	d := s.p.clk.Since(s.t0)
	s.p.st.sessionNs.Add(int64(d))
	s.p.st.sessionHist.Observe(d)
}
