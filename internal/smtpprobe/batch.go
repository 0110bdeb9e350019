package smtpprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/mxdns"
)

// item is one RCPT to get a verdict for: an address of the batch, or the
// catch-all probe (idx -1).
type item struct {
	idx   int
	addr  string
	tries int // 4xx answers so far
	drops int // sessions lost with this item in flight
	due   time.Time
	last  reply // last temporary reply
	host  string
	done  bool
}

// Catch-all verdict of the batch's domain.
type caState int

const (
	caUnknown caState = iota // not known, probe not queued
	caQueued                 // probe queued, deferred or in flight
	caNo
	caYes
	caInconclusive // probe gave no definite answer
)

// batch is the state of one ProbeBatch call.
type batch struct {
	p       *Prober
	ctx     context.Context
	domain  string
	targets []target
	results []Result

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every state change
	ready     []*item       // FIFO; retries after a drop go to the front
	deferred  []*item
	remaining int    // items without a final verdict
	accepted  []bool // 2xx: final outcome depends on the catch-all verdict
	nAccepted int
	failed    []bool // per target: refused, dropped or stalled
	dead      error  // all targets failed
	over      bool   // ctx ended (or its deadline cannot be met)
	overErr   error  // why: wraps context.Canceled or DeadlineExceeded
	ca        caState
	caItem    *item
	estimate  time.Duration // time one more session for a retry is expected to take
}

func newBatch(ctx context.Context, p *Prober, domain string, mx []mxdns.MXHost, addrs []string, results []Result) *batch {
	b := &batch{
		p: p, ctx: ctx, domain: domain, results: results,
		changed:  make(chan struct{}),
		accepted: make([]bool, len(addrs)),
	}
	hosts := slices.Clone(mx)
	slices.SortStableFunc(hosts, func(a, c mxdns.MXHost) int { return int(a.Pref) - int(c.Pref) })
	port := strconv.Itoa(p.cfg.Port)
	for _, h := range hosts {
		for _, a := range h.Addrs {
			b.targets = append(b.targets, target{host: h.Host, addr: net.JoinHostPort(a.String(), port)})
		}
	}
	b.failed = make([]bool, len(b.targets))
	for i, a := range addrs {
		results[i] = Result{}
		if !validRcpt(a) {
			results[i] = Result{Outcome: Unconfirmed, Err: fmt.Errorf("%w: %q", ErrBadAddress, truncate(a, 64))}
			continue
		}
		b.ready = append(b.ready, &item{idx: i, addr: a})
		b.remaining++
	}
	if v, ok := p.cache.get(domain); ok {
		p.caCached.Add(1)
		b.ca = caNo
		if v {
			b.ca = caYes
		}
	}
	if len(b.targets) == 0 {
		b.dead = ErrNoHosts
	}
	return b
}

func (b *batch) run() error {
	b.mu.Lock()
	if b.dead != nil {
		b.failAllLocked()
	}
	n := b.remaining
	b.mu.Unlock()
	if n > 0 {
		// Enough sessions to split the addresses, within the per-host limit.
		w := min(b.p.cfg.MaxConnsPerHost, (n+b.p.cfg.MaxRcptPerSession)/b.p.cfg.MaxRcptPerSession)
		var wg sync.WaitGroup
		for range w - 1 {
			wg.Go(b.worker)
		}
		b.worker()
		wg.Wait()
	}
	b.finish()
	if b.over {
		return fmt.Errorf("smtpprobe: %s: %w", b.domain, b.overErr)
	}
	return nil
}

// finish decides the accepted addresses from the catch-all verdict and
// caches a definite verdict.
func (b *batch) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := CatchAll
	if b.ca == caNo {
		out = Deliverable
	}
	for i, ok := range b.accepted {
		if ok {
			b.results[i].Outcome = out
		}
	}
}

func (b *batch) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// next returns the next item to probe, waiting up to maxWait (forever if
// negative) for deferred ones to come due or in-flight ones to come back;
// nil when none is available in time or the batch is over.
func (b *batch) next(maxWait time.Duration) *item {
	var limit time.Time
	if maxWait >= 0 {
		limit = time.Now().Add(maxWait)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		if b.over || b.remaining == 0 {
			return nil
		}
		now := time.Now()
		var earliest time.Time
		keep := b.deferred[:0]
		for _, it := range b.deferred {
			if !it.due.After(now) {
				b.ready = append(b.ready, it)
				continue
			}
			if earliest.IsZero() || it.due.Before(earliest) {
				earliest = it.due
			}
			keep = append(keep, it)
		}
		clear(b.deferred[len(keep):])
		b.deferred = keep
		if ca := b.caItem; ca != nil && !ca.done && !b.caNeededLocked() {
			// Only the catch-all probe is left and nothing needs it: do not
			// wait or connect for it.
			if i := slices.Index(b.deferred, ca); i >= 0 {
				b.deferred = slices.Delete(b.deferred, i, i+1)
				b.finalLocked(ca, Result{})
				continue
			}
			if i := slices.Index(b.ready, ca); i >= 0 {
				b.ready = slices.Delete(b.ready, i, i+1)
				b.finalLocked(ca, Result{})
				continue
			}
		}
		if len(b.ready) > 0 {
			it := b.ready[0]
			b.ready[0] = nil
			b.ready = b.ready[1:]
			return it
		}
		if !limit.IsZero() {
			if !now.Before(limit) {
				return nil
			}
			if earliest.IsZero() || limit.Before(earliest) {
				earliest = limit
			}
		}
		ch := b.changed
		b.mu.Unlock()
		var timer *time.Timer
		var fire <-chan time.Time
		if !earliest.IsZero() {
			timer = time.NewTimer(time.Until(earliest))
			fire = timer.C
		}
		select {
		case <-ch:
		case <-fire:
		case <-b.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		b.mu.Lock()
		if ctxOver(b.ctx) && !b.over {
			b.abortLocked(ctxErr(b.ctx))
		}
	}
}

// holdIdle is how long a worker keeps an idle session open for a deferred
// item about to come due (items deferred in one session come due together).
const holdIdle = 100 * time.Millisecond

// worker runs sessions until the batch is over.
func (b *batch) worker() {
	var s *session
	defer func() {
		if s != nil {
			s.quit()
		}
	}()
	for {
		var it *item
		if s != nil {
			it = b.next(holdIdle)
		} else {
			it = b.next(0)
		}
		if it == nil {
			// Nothing due soon: do not hold a host slot while waiting.
			if s != nil {
				s.quit()
				s = nil
			}
			if it = b.next(-1); it == nil {
				return
			}
		}
		if s != nil && s.rcpts >= b.p.cfg.MaxRcptPerSession {
			s.quit()
			s = nil
		}
		if s == nil {
			var err error
			if s, err = b.open(); err != nil {
				b.requeue(it, nil, err)
				continue
			}
		}
		if !b.probe(s, it) {
			if s.broken {
				s.close()
			} else {
				s.quit()
			}
			s = nil
		}
	}
}

// open connects to the first target not known to have failed, marking
// failing ones, and skipping (as failed) those the Prober has penalised.
// On error the batch is already dead or over.
func (b *batch) open() (*session, error) {
	for {
		b.mu.Lock()
		if b.over || b.dead != nil {
			err := b.dead
			if b.over {
				err = b.overErr
			}
			b.mu.Unlock()
			return nil, err
		}
		ix := slices.Index(b.failed, false)
		b.mu.Unlock()
		if err := b.p.penalties.check(b.targets[ix].addr); err != nil {
			// Stalled or unreachable recently: go to the next host at once.
			b.hostFailed(ix, &hostError{tg: b.targets[ix], err: err})
			continue
		}
		s, err := b.p.dial(b.ctx, b.targets[ix], ix)
		if err == nil {
			return s, nil
		}
		b.hostFailed(ix, err)
	}
}

// hostFailed marks target ix as failed (or the batch as over when the
// caller's context is to blame).
func (b *batch) hostFailed(ix int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if isBudget(err) || ctxOver(b.ctx) {
		if !b.over {
			b.abortLocked(err)
		}
		return
	}
	if errors.Is(err, ErrHostSkipped) {
		b.p.skipped.Add(1)
	} else {
		b.p.hostFails.Add(1)
	}
	if b.failed[ix] {
		return
	}
	b.failed[ix] = true
	if !slices.Contains(b.failed, false) && b.dead == nil {
		b.dead = fmt.Errorf("%w: last: %w", ErrAllHostsFailed, err)
		b.failAllLocked()
	}
	b.notifyLocked()
}

// probe sends one RCPT for it on s. It returns false when the session must
// end (broken, or the server asked to close or refused our sender).
func (b *batch) probe(s *session, it *item) bool {
	rcpt := it.addr
	if it.idx < 0 {
		if !b.caNeeded() {
			b.final(it, Result{})
			return true
		}
		b.p.caProbes.Add(1)
	}
	if !isASCII(rcpt) && !s.smtputf8 {
		b.final(it, Result{Outcome: Unconfirmed, Host: s.tg.host,
			Err: fmt.Errorf("%w: non-ASCII address and %s lacks SMTPUTF8", ErrBadAddress, s.tg.host)})
		return true
	}
	mail, rc, err := s.transaction(rcpt)
	if err != nil {
		if s.verdicts == 0 || isBudget(err) || ctxOver(b.ctx) {
			b.hostFailed(s.hostIx, err)
		}
		b.requeue(it, s, err)
		return false
	}
	b.observe(s)
	if mail.class() != 2 {
		if mail.class() == 4 {
			b.temporary(it, s, mail)
			return false
		}
		// Our sender is refused here (5xx): no verdict from this host.
		b.hostFailed(s.hostIx, &hostError{tg: s.tg, reply: mail})
		b.requeue(it, s, nil)
		return false
	}
	switch k := classifyRcpt(rc); k {
	case kindAccepted:
		b.accept(it, s, rc)
	case kindMissing, kindFull, kindPolicy:
		if it.idx < 0 {
			b.caVerdict(caNo)
			b.final(it, Result{})
		} else {
			out := Missing
			switch k {
			case kindFull:
				out = Full
			case kindPolicy:
				out = Policy
			}
			b.final(it, Result{Outcome: out, Reply: rc.last, Host: s.tg.host})
		}
	case kindTemporary:
		b.temporary(it, s, rc)
		return rc.code != 421
	case kindRetryNow:
		// The server counts recipients per session: reconnect at once.
		if it.drops++; it.drops >= 2 {
			b.final(it, Result{Outcome: Unconfirmed, Reply: rc.last, Host: s.tg.host})
		} else {
			b.requeue(it, s, nil)
		}
		return false
	default:
		if it.idx < 0 {
			b.caVerdict(caInconclusive)
		}
		b.final(it, Result{Outcome: Unconfirmed, Reply: rc.last, Host: s.tg.host})
	}
	return true
}

// observe updates the estimate of one retry session's duration.
func (b *batch) observe(s *session) {
	b.mu.Lock()
	b.estimate = max(b.estimate, 2*(s.setup+s.rtt))
	b.mu.Unlock()
}

func (b *batch) accept(it *item, s *session, rc reply) {
	if it.idx < 0 {
		b.caVerdict(caYes)
		b.final(it, Result{})
		return
	}
	b.mu.Lock()
	b.accepted[it.idx] = true
	b.nAccepted++
	b.mu.Unlock()
	b.final(it, Result{Outcome: Deliverable, Reply: rc.last, Host: s.tg.host})
	b.queueCatchAll()
}

// queueCatchAll queues the random-address probe, at the front, the first
// time an address is accepted or deferred while the verdict is unknown.
// The probe runs in its own transaction (RSET before the next MAIL), never
// as a second RCPT of the real address's transaction.
func (b *batch) queueCatchAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ca != caUnknown || b.over || b.dead != nil {
		return
	}
	b.ca = caQueued
	b.caItem = &item{idx: -1, addr: b.p.randomLocal(b.domain) + "@" + b.domain}
	b.ready = slices.Insert(b.ready, 0, b.caItem)
	b.remaining++
	b.notifyLocked()
}

func (b *batch) caVerdict(v caState) {
	b.mu.Lock()
	b.ca = v
	b.mu.Unlock()
	switch v {
	case caYes:
		b.p.cache.put(b.domain, true)
	case caNo:
		b.p.cache.put(b.domain, false)
	}
}

// temporary handles a 4xx: defer the item for GreylistRetry when retries
// remain and ctx's deadline leaves room for the wait plus one more
// session, else give up with Unconfirmed.
func (b *batch) temporary(it *item, s *session, r reply) {
	it.tries++
	it.last, it.host = r, s.tg.host
	delay := b.p.cfg.GreylistRetry
	b.mu.Lock()
	fits := true
	if dl, ok := b.ctx.Deadline(); ok {
		// The wait, a rate token at worst, and one more session.
		token := time.Duration(float64(time.Second) / b.p.cfg.RatePerHost)
		fits = time.Until(dl) >= delay+token+b.estimate
	}
	if it.tries <= b.p.cfg.MaxGreylistRetries && fits && !b.over && b.dead == nil {
		b.p.deferred.Add(1)
		it.due = time.Now().Add(delay)
		b.deferred = append(b.deferred, it)
		b.notifyLocked()
		b.mu.Unlock()
		if it.idx >= 0 {
			// Start the random address's greylisting window now too, so
			// that the verdict is ready when the address is retried.
			b.queueCatchAll()
		}
		return
	}
	b.mu.Unlock()
	if it.idx < 0 {
		b.caVerdict(caInconclusive)
	}
	b.final(it, Result{Outcome: Unconfirmed, Reply: r.last, Host: s.tg.host, Greylisted: looksGreylisted(r)})
}

// caNeeded reports whether the catch-all verdict can still matter: an
// address was accepted, or some address is still undecided.
func (b *batch) caNeeded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.caNeededLocked()
}

func (b *batch) caNeededLocked() bool {
	return b.remaining > 1 || b.nAccepted > 0
}

func isBudget(err error) bool {
	var be *budgetError
	return errors.As(err, &be)
}

// requeue puts an item whose session failed back at the front of the
// queue, or settles it when the batch is over or dead, or when it was in
// flight on two lost sessions.
func (b *batch) requeue(it *item, s *session, err error) {
	b.mu.Lock()
	if s != nil && err != nil {
		it.drops++
	}
	switch {
	case b.over:
		b.settleLocked(it, b.overErr)
	case b.dead != nil:
		b.settleLocked(it, b.dead)
	case it.drops >= 2:
		b.settleLocked(it, err)
	default:
		b.ready = slices.Insert(b.ready, 0, it)
		b.notifyLocked()
	}
	b.mu.Unlock()
}

// final records the verdict of an item.
func (b *batch) final(it *item, r Result) {
	b.mu.Lock()
	b.finalLocked(it, r)
	b.mu.Unlock()
}

func (b *batch) finalLocked(it *item, r Result) {
	if it.done {
		return
	}
	it.done = true
	b.remaining--
	if it.idx >= 0 {
		b.results[it.idx] = r
	} else if b.ca == caQueued {
		b.ca = caInconclusive
	}
	b.notifyLocked()
}

// settleLocked gives an item without a verdict its outcome: Timeout when
// the caller's context is over, else Unconfirmed.
func (b *batch) settleLocked(it *item, err error) {
	r := Result{Outcome: Unconfirmed, Err: err, Host: it.host}
	if it.tries > 0 {
		r.Reply, r.Greylisted = it.last.last, looksGreylisted(it.last)
	}
	var he *hostError
	if errors.As(err, &he) {
		r.Host = he.tg.host
		if he.reply.code != 0 {
			r.Reply = he.reply.last
		}
	}
	if b.over {
		r.Outcome = Timeout
	}
	b.finalLocked(it, r)
}

func (b *batch) abortLocked(err error) {
	if !isBudget(err) {
		if ce := ctxErr(b.ctx); ce != nil && !errors.Is(err, ce) {
			err = fmt.Errorf("%w: %w", ce, err)
		}
		err = &budgetError{err}
	}
	b.over, b.overErr = true, err
	b.settleQueuedLocked(err)
}

func (b *batch) failAllLocked() {
	b.settleQueuedLocked(b.dead)
}

func (b *batch) settleQueuedLocked(err error) {
	for _, it := range b.ready {
		b.settleLocked(it, err)
	}
	for _, it := range b.deferred {
		b.settleLocked(it, err)
	}
	b.ready, b.deferred = nil, nil
	b.notifyLocked()
}
