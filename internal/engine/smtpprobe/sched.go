package smtpprobe

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// hostQ is the work queue of one MX host address (ip:port): items of any
// job whose current target it is. Guarded by Prober.mu, except lim.
type hostQ struct {
	key      string
	front    []*item // LIFO: retries and catch-all probes go first
	back     []*item // FIFO: new addresses
	head     int     // first unread index of back
	n        int     // len(front) + len(back) - head (done items included until taken)
	sessions int     // sessions running for this host (waiting, connecting or open)
	idle     int     // of which waiting for work
	wake     chan struct{}
	hs       HostState     // what was learnt about the host (Config.HostMemory)
	group    int           // RCPTs a round trip (0: Config.PipelineStart; see group.go)
	txProven int           // most RCPTs one transaction took before any "too many recipients" (see txPlanLocked)
	estimate time.Duration // one more session for a retry takes about this long
	round    time.Duration // the latest window's round trip (a session's setup left out)

	// Refusals (the host asking to slow down): how many in a row, the
	// last one, no new session before backoffUntil (timer kicks the host
	// then), and when the host's limits were last lowered (one lowering a
	// refusal episode).
	refusals     int
	lastRefusal  *refusalError
	backoffUntil time.Time
	timer        clock.Timer
	loweredAt    time.Time
	accepted     []time.Time // recent connections that got a greeting (within RefusalWindow and windowMargin)
	refusedAt    []time.Time // recent connections refused at the greeting (the same span; see slidingSlotLocked)
	sliding      bool        // the host counts every attempt in a sliding window (see refusedLocked)
	windowEnd    time.Time   // the end of the window its refusal taught (lowerLocked)
	slideSlots   []time.Time // at a sliding host: its attempts within the window (see slidingSlotLocked)
	// A host that counts connections in windows (HostState.ConnsPerWindow):
	// our current window's start and connections.
	winStart time.Time
	winCount int
	// open counts our sessions to q that the host accepted and that have
	// not begun to quit; peakOpen the most at once: what the host surely
	// took at once (one quitting may have gone from the host's count
	// before we read its close: a session accepted then is no evidence of
	// two at once). conns counts our connections to q, from their dial to
	// their close: those the host may count (a session waiting for its
	// lease or its rate is not one).
	open, peakOpen, conns int
	// slowing counts the open sessions the cost model sent past the
	// host's quiet budget (cost.go): their round trips are error sleeps.
	slowing int

	waiting bool // in Prober.waitq
	// sampled: q's sessions have told enough to judge another session
	// beside the first; budgeted: one of them spent the host's
	// rejection or non-mail budget with work left (see sampleLocked).
	sampled, budgeted bool

	// For HostReport: sessions and RCPTs, and the span from the first
	// session's start to the last one's end.
	nSessions, nRcpts int
	first, last       time.Time
	// For the host's floor (pace.go): addresses it deferred (4xx) and
	// the time its sessions were open up to their last reply, summed
	// (an idle session's wait for more work is not the host's).
	nDeferred int
	busy      time.Duration
	// nRejected counts the rejections among the RCPTs it answered (the
	// cost model's share of refused recipients).
	nRejected int
	// greyWaiting counts this host's items waiting out its greylisting in
	// the timer heap; greyDue is when the last of them comes due.
	greyWaiting int
	greyDue     time.Time
	// rep is the host's reputation per egress identity (reputation.go).
	rep hostRep
}

const (
	// secondSessionBacklog is the queue at a host that warrants another
	// session beside a running one.
	secondSessionBacklog = 64
	// minSweep is the host-map size that triggers the first sweep of idle
	// hosts (their queues and rate buckets).
	minSweep = 4096
	// holdIdle is how long an open session waits for more work before
	// QUIT: deferred items come due together, and streamed batches follow
	// each other closely.
	holdIdle = 100 * time.Millisecond
	// greyHold is the longest an open session sending a host's
	// greylisting retries waits for the next of them to come due (they
	// do one after another, as the first pass sent them); at a host that
	// counts connections in windows, up to a window for the last.
	greyHold = 2 * time.Second
)

func (p *Prober) host(key string) *hostQ {
	q := p.hosts[key]
	if q == nil {
		if len(p.hosts) >= p.sweepAt {
			p.sweepLocked()
		}
		q = &hostQ{key: key, wake: make(chan struct{}), hs: p.cfg.HostMemory.Load(key)}
		p.hosts[key] = q
	}
	return q
}

// sweepLocked forgets idle hosts. (What was learnt about them stays in
// Config.HostMemory, their rate buckets in Config.Limiter.)
func (p *Prober) sweepLocked() {
	now := p.clk.Now()
	for k, q := range p.hosts {
		if q.n == 0 && q.sessions == 0 && !q.waiting && q.timer == nil && q.greyWaiting == 0 && !now.Before(q.backoffUntil) &&
			!now.Before(q.winStart.Add(p.cfg.RefusalWindow+windowMargin)) {
			p.sweptFloor, p.sweptSpan = p.paceSumsLocked(q, p.sweptFloor, p.sweptSpan)
			delete(p.hosts, k)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.hosts))
}

// perSession is the number of RCPTs a session to q may carry.
func (p *Prober) perSession(q *hostQ) int {
	return capBy(p.cfg.MaxRcptPerSession, q.hs.RcptsPerSession)
}

// txCap is the number of RCPTs a transaction at q may carry.
func (p *Prober) txCap(q *hostQ) int {
	return capBy(p.cfg.MaxRcptPerTransaction, q.hs.RcptsPerTransaction)
}

// txPlanLocked returns the number of RCPTs a transaction at q may carry
// and tells s how far a window may take a transaction past what the host
// has shown it takes. A host whose limit per transaction is not known
// (no "452 too many recipients" yet) may have one below RFC 5321's 100
// (sendmail's confMAX_RCPTS_PER_MESSAGE, Exim's recipients_max), and a
// server that counts a 452 as a bad recipient (sendmail's BadRcptThrottle)
// sleeps for each one past its limit: so a window takes a transaction at
// most PipelineStart RCPTs past the most one has taken there (q.txProven)
// and the recipients beyond go to a new transaction. A 452 then comes
// for at most PipelineStart RCPTs, once, and settles the limit. While
// it is not known, a session whose non-mail budget leaves too few
// transactions for the host's work takes bigger ones (see stretchLocked);
// queued is the work taken from q for the window being planned.
func (p *Prober) txPlanLocked(q *hostQ, s *session, queued int) int {
	txCap := p.txCap(q)
	if q.hs.RcptsPerTransaction <= 0 {
		txCap = max(txCap, p.stretchLocked(q, s, queued))
	}
	s.txSafe, s.txStep = txCap, 0
	if q.hs.RcptsPerTransaction <= 0 && q.txProven < txCap {
		s.txSafe, s.txStep = q.txProven, max(1, p.cfg.PipelineStart)
	}
	return txCap
}

// stretchLocked is the RCPTs a transaction at q must carry for the
// host's work (q's queue and the queued RCPTs taken from it for the
// window being planned) to fit in the transactions s's non-mail budget
// still lets it open, the open one's room included (0: none is needed).
// A server that does not name itself gets Exim's budget, 10 RSETs (see
// eximNonmail): at MaxRcptPerTransaction's 100 a transaction, a session
// ends at 1,100 RCPTs, and a provider hosting thousands of domains on a
// few MX hosts gets a new connection for every 1,100 of its recipients,
// although it may take them all in one. RFC 5321 §4.5.3.1.8 has a server
// refuse the recipients past its limit in order ("452 too many
// recipients"), never the message; the probing of txPlanLocked keeps the
// 452s to PipelineStart RCPTs, once, and a limit learnt ends the
// stretching. The session's own bound (MaxRcptPerSession, or the host's)
// still holds: capacity applies it.
func (p *Prober) stretchLocked(q *hostQ, s *session, queued int) int {
	if s.nonmailCap <= 0 {
		return 0
	}
	work := q.n + queued
	if s.inTx {
		work += s.txRcpts // the open transaction's, counted against its cap
	}
	txs := max(0, s.nonmailRoom()) + 1 // the open one (or the first MAIL's), and one a non-mail command
	return min((work+txs-1)/txs, p.perSession(q))
}

// maxConns is the number of sessions q may have at once.
func (p *Prober) maxConns(q *hostQ) int {
	return capBy(p.cfg.MaxConnsPerHost, q.hs.Conns)
}

// sleepingConns is the number of sessions q may have at once while some
// sleep through its error sleeps as planned (MaxSleepingConnsPerHost).
func (p *Prober) sleepingConns(q *hostQ) int {
	return capBy(max(p.cfg.MaxConnsPerHost, p.cfg.MaxSleepingConnsPerHost), q.hs.Conns)
}

// connsNowLocked is the number of sessions q may have at once now: more
// while some of them sleep through its error sleeps (q.slowing).
func (p *Prober) connsNowLocked(q *hostQ) int {
	if q.slowing > 0 {
		return p.sleepingConns(q)
	}
	return p.maxConns(q)
}

// routes is the number of egresses sessions leave from: each has its own
// per-host limits (the Limiter holds each).
func (p *Prober) routes() int {
	if p.cfg.PickRoute == nil {
		return 1
	}
	return p.cfg.Routes
}

// connRate is q's new connections a second.
func (p *Prober) connRate(q *hostQ) float64 {
	if r := q.hs.ConnRate; r > 0 && r < p.cfg.RatePerHost {
		return r
	}
	return p.cfg.RatePerHost
}

// burst is q's rate bucket: its connection limit, or one connection once
// the host asked to slow down (a server counting connections in fixed
// windows, as Postfix's anvil does, sees no burst then).
func (p *Prober) burst(q *hostQ) int {
	if q.hs.ConnRate > 0 {
		return 1
	}
	return p.maxConns(q)
}

// capBy is limit lowered to a learnt value (0: none learnt).
func capBy(limit, learnt int) int {
	if learnt > 0 && learnt < limit {
		return learnt
	}
	return limit
}

// learnLocked records a lesson about q (see HostState) and applies it.
func (p *Prober) learnLocked(q *hostQ, s HostState) {
	if q.hs.Merge(s) == q.hs {
		return
	}
	q.hs = p.cfg.HostMemory.Learn(q.key, s)
}

func (p *Prober) enqueue(q *hostQ, it *item, front bool) {
	it.since = p.clk.Now()
	if front {
		q.front = append(q.front, it)
	} else {
		q.back = append(q.back, it)
	}
	q.n++
	p.kick(q)
}

// take removes up to max live items from q.
//
// At a host that counts connections in windows and greylists, addresses
// never sent go before retries: an address's greylisting starts when it
// is first sent, and the host's connections are scarce. Retries already
// due can wait for the window's later sessions; a new address left for
// them has its retry fall due a window later.
func (p *Prober) take(q *hostQ, max int) []*item {
	var out []*item
	now := p.clk.Now()
	newFirst := q.hs.ConnsPerWindow > 0 && q.nDeferred > 0
	for len(out) < max && q.n > 0 {
		var it *item
		if i := p.newInFrontLocked(q, newFirst); i >= 0 {
			last := len(q.front) - 1
			it = q.front[i]
			copy(q.front[i:], q.front[i+1:])
			q.front[last], q.front = nil, q.front[:last]
		} else if n := len(q.front); n > 0 && (!newFirst || q.head == len(q.back) || q.front[n-1].tries == 0) {
			it, q.front[n-1], q.front = q.front[n-1], nil, q.front[:n-1]
		} else {
			it, q.back[q.head] = q.back[q.head], nil
			q.head++
		}
		q.n--
		if it.done {
			continue
		}
		p.st.queueNs.Add(int64(now.Sub(it.since)))
		out = append(out, it)
	}
	if q.head == len(q.back) {
		q.back, q.head = q.back[:0], 0
	} else if q.head >= 1024 && 2*q.head >= len(q.back) {
		q.back = append(q.back[:0], q.back[q.head:]...)
		q.head = 0
	}
	return out
}

// newInFrontLocked is the index of the latest address never sent (a new
// one put back unsent) in q's front, when new addresses go first and none
// is left at the back; -1 otherwise.
func (p *Prober) newInFrontLocked(q *hostQ, newFirst bool) int {
	if !newFirst || q.head < len(q.back) {
		return -1
	}
	for i := len(q.front) - 1; i >= 0; i-- {
		if it := q.front[i]; it.tries == 0 && !it.done {
			return i
		}
	}
	return -1
}

// kick starts a session for q when it has work that the running sessions
// cannot take soon, within the per-host and global limits.
func (p *Prober) kick(q *hostQ) {
	if q.n == 0 {
		return
	}
	if q.idle > 0 {
		close(q.wake)
		q.wake = make(chan struct{})
	}
	// Another session (within the per-host limit) only for a backlog of
	// several round trips' work (sessions at a Postfix host carry a
	// window or two before their rejection budget is spent): a new one
	// costs a connect, a greeting and EHLO first. A session whose group
	// is still growing (see group.go) takes less a round trip at first:
	// what the running ones have yet to grow to does not count as backlog.
	backlog := q.n - q.sessions*(p.cfg.PipelineDepth-p.groupLocked(q))
	if q.sessions >= p.connsNowLocked(q)*p.routes() {
		return
	}
	if q.sessions > 0 {
		// (At a host that slows a spent identity's every reply, its
		// own rule: reputation.go.)
		want, ok := p.repParallelLocked(q)
		if !ok {
			want = backlog >= secondSessionBacklog && p.parallelShortensLocked(q, backlog)
		}
		if !want {
			return
		}
	}
	if p.clk.Now().Before(q.backoffUntil) {
		p.armBackoffLocked(q)
		return
	}
	if p.open >= p.cfg.MaxSessions {
		if !q.waiting {
			q.waiting = true
			p.waitq = append(p.waitq, q)
		}
		return
	}
	q.sessions++
	p.open++
	if n := uint64(p.open); n > p.st.peak.Load() {
		p.st.peak.Store(n)
	}
	go p.runSession(q)
}

// parallelShortensLocked reports whether another session beside the
// running ones finishes q's work sooner. While q has addresses waiting
// out its greylisting, its work ends no sooner than their last retry:
// another session helps only when the running ones cannot send the
// backlog before then (about a round trip a group); likewise while
// other hosts' addresses wait out their greylisting longer. This
// keeps a host's sessions a function of its work and its limits, not of
// how busy the process is or how the list was split.
func (p *Prober) parallelShortensLocked(q *hostQ, backlog int) bool {
	if !q.sampled {
		// Nothing known yet: the running session's first groups tell
		// whether the host greylists (then another gains nothing) and
		// how fast it answers; sampleLocked kicks q again then.
		return false
	}
	// What one more session costs before its first window: its setup
	// and a round trip (estimate is about two of those); what the
	// backlog takes the running ones, a round trip a group.
	rtt, round := q.estimate/2, q.round
	if round <= 0 {
		round = rtt
	}
	if rtt <= 0 || q.slowing > 0 || q.budgeted {
		// (Sessions sleeping through a host's errors, as the cost model
		// planned with the sessions the host takes at once, or cut
		// short by the host's error budget, each a connection of its
		// own: another one shortens the work by its share.)
		return true // the backlog rule decides
	}
	// The backlog takes the running sessions a round trip a group, and
	// another setup each time one of them reaches its RCPTs a session.
	per := max(p.perSession(q), 1)
	rounds := backlog/max(min(p.groupLocked(q), per), 1) + 1
	drain := (time.Duration(rounds)*round + time.Duration(backlog/per)*rtt) / time.Duration(q.sessions)
	if q.greyWaiting > 0 && drain <= p.clk.Until(q.greyDue) {
		return false
	}
	// Nor while the running ones send it well before the process's other
	// greylisted addresses come due: the work ends no sooner.
	if 2*drain <= p.horizonLocked(q) {
		return false
	}
	// What one more session saves must outweigh its own connect,
	// greeting and EHLO.
	return drain/time.Duration(q.sessions+1) > rtt
}

// sampleLocked notes, after a window of q's answered or a session cut
// short by its budget, whether q's sessions have told enough to judge
// another session beside the first (q.sampled): as many RCPTs answered
// as the backlog that warrants one (secondSessionBacklog), enough to
// tell its pace and, where a share of a host's domains greylist (a
// provider's), whether it greylists; or a session that spent the host's
// rejection budget with work left (q.budgeted). Until then, another
// session may well gain nothing. When it turns, the parallel-session
// rule (kick) judges q's backlog.
func (p *Prober) sampleLocked(q *hostQ) {
	if q.sampled || (q.nRcpts < secondSessionBacklog && !q.budgeted) {
		return
	}
	q.sampled = true
	for n := -1; n != q.sessions; { // (as many as the rule finds shorten q's work)
		n = q.sessions
		p.kick(q)
	}
}

// horizonLocked is how long from now q's work may take at no cost to
// the process's: until the last of the other hosts' greylisted
// addresses comes due for its retry (the process's work ends no sooner;
// q's own are q's work), less the greylisting delay when q greylists
// (its new addresses' retries come due that much after them). Zero when
// none waits (or none is known: see noteGreyLocked). Half is kept back:
// more work may come.
//
// The last deferral counts while its host has addresses waiting out its
// greylisting, not only while that one address does: an address settled
// early (its job ended, another MX host answered) leaves the others
// deferred with it waiting, and a horizon that fell to zero with it
// would let a burst of work open a parallel session the process's end
// does not need.
func (p *Prober) horizonLocked(q *hostQ) time.Duration {
	last := p.greyLast[0]
	if last.q == q {
		last = p.greyLast[1]
	}
	if last.q == nil || last.q == q || last.q.greyWaiting == 0 {
		return 0
	}
	by := p.clk.Until(last.due)
	if q.nDeferred > 0 {
		by -= p.cfg.GreylistRetry
	}
	return max(0, by) / 2
}

// greyMark is a greylisting deferral: the host and when the address
// comes due for its retry.
type greyMark struct {
	q   *hostQ
	due time.Time
}

// noteGreyLocked notes it, just deferred to wait out its host's
// greylisting, as the latest to come due (they are deferred by the same
// delay: the last deferred comes due last), and the one before it at
// another host.
func (p *Prober) noteGreyLocked(it *item) {
	if last := p.greyLast[0]; last.q != nil && last.q != it.greyQ {
		p.greyLast[1] = last
	}
	p.greyLast[0] = greyMark{q: it.greyQ, due: it.due}
}

// slot is a session goroutine's hold on the global session cap. It is let
// go while a session says QUIT (no work is done there) and taken again for
// the next session.
type slot struct{ held bool }

// runSession runs sessions to q while it has work, then frees its slots.
func (p *Prober) runSession(q *hostQ) {
	sl := &slot{held: true}
	defer p.sessionEnded(q, sl)
	for p.session(q, sl) && p.regain(q, sl) {
	}
}

func (p *Prober) sessionEnded(q *hostQ, sl *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q.sessions--
	if sl.held {
		p.open--
	}
	p.serveWaitqLocked()
	p.kick(q)
}

// letGo frees the global slot of a session that is ending.
func (p *Prober) letGo(sl *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sl.held {
		sl.held = false
		p.open--
		p.serveWaitqLocked()
	}
}

// regain takes a global slot for the goroutine's next session; when none
// is free, q waits in line and the goroutine ends.
func (p *Prober) regain(q *hostQ, sl *slot) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sl.held {
		return true
	}
	if p.open < p.cfg.MaxSessions {
		sl.held = true
		p.open++
		if n := uint64(p.open); n > p.st.peak.Load() {
			p.st.peak.Store(n)
		}
		return true
	}
	if !q.waiting {
		q.waiting = true
		p.waitq = append(p.waitq, q)
	}
	return false
}

// serveWaitqLocked starts sessions for hosts waiting for a global slot,
// the most work first: the hosts with the longest queues bound a list's
// wall time, so they should not wait behind hosts with a few addresses.
func (p *Prober) serveWaitqLocked() {
	for len(p.waitq) > 0 && p.open < p.cfg.MaxSessions {
		best := 0
		for i, w := range p.waitq {
			if w.n > p.waitq[best].n {
				best = i
			}
		}
		w := p.waitq[best]
		last := len(p.waitq) - 1
		p.waitq[best], p.waitq[last] = p.waitq[last], nil
		p.waitq = p.waitq[:last]
		w.waiting = false
		p.kick(w)
	}
}

// session runs one SMTP session to q and reports whether the caller should
// run another at once (the server's per-session limit was reached and work
// is left).
func (p *Prober) session(q *hostQ, sl *slot) bool {
	if h, ok := p.cfg.HostMemory.(*sharedHostMemory); ok {
		h.awaitFirst(q.key) // (q.key is read-only)
	}
	p.mu.Lock()
	if p.clk.Now().Before(q.backoffUntil) {
		p.mu.Unlock()
		return false // the host asked to slow down: kick starts a session later
	}
	q.hs = q.hs.Merge(p.cfg.HostMemory.Load(q.key)) // what other processes learnt meanwhile
	items := p.take(q, min(p.groupLocked(q), p.perSession(q), p.repTakeLocked(q)))
	if len(items) > 0 && !p.windowSlotLocked(q, p.clk.Now()) {
		p.requeueLocked(items, false, nil) // to wait for the host's next window
		items = nil
	}
	answered, perWindow := q.hs.Answered, q.hs.ConnsPerWindow
	lim := p.limitsLocked(q)
	prefer := p.repPreferLocked(q)
	p.mu.Unlock()
	if len(items) == 0 {
		return false
	}
	tg := items[0].tg
	budget := latestDeadline(items)
	egress, dialer := p.cfg.Egress, p.cfg.Dialer
	if p.cfg.PickRoute != nil {
		var err error
		if egress, dialer, err = p.cfg.PickRoute(prefer); err != nil {
			p.noRoute(items, err)
			return false
		}
	}
	// The connection slot and the rate token are waited for without a
	// connection open.
	lease, err := p.lease(fleet.Key{Egress: egress, Host: tg.addr}, budget, lim)
	if err != nil {
		p.abortJobs(items, err)
		return true
	}
	if !p.windowTicket(fleet.Key{Egress: egress, Host: tg.addr}, perWindow) {
		lease.Release()
		p.mu.Lock()
		p.noTicketLocked(q, items)
		p.mu.Unlock()
		return false
	}
	// What other processes found while this one waited for its slot.
	if items = p.settleSharedCatchAll(items); len(items) == 0 {
		lease.Release()
		return false
	}
	if err := p.penalties.checkShared(tg.addr); err != nil {
		// Another session (or process) found it stalled meanwhile: while
		// this one waited for its slot, say, behind that tarpit.
		lease.Release()
		p.st.skipped.Add(1)
		p.hostFailed(q, items, &hostError{tg: tg, err: err})
		return false
	}
	p.mu.Lock()
	t0, beside := p.clk.Now(), q.conns
	q.conns++
	p.mu.Unlock()
	s, err := p.dial(tg, budget, answered, dialer)
	if err != nil {
		p.mu.Lock()
		q.conns--
		p.mu.Unlock()
	}
	if err != nil {
		lease.Release()
	} else {
		s.hold(lease)
	}
	var refused *refusalError
	switch {
	case err == nil:
	case isBudget(err), isProxyLost(err):
		p.requeue(items, false, err)
		return true
	case noRoute(err):
		p.noRoute(items, err)
		return false
	case errors.As(err, &refused):
		refused.beside = beside
		p.mu.Lock()
		p.refusedLocked(q, refused, t0, true, items)
		p.mu.Unlock()
		return false
	default:
		p.hostFailed(q, items, err)
		return false
	}
	s.egress = egress
	p.mu.Lock()
	p.noteAcceptedLocked(q, t0)
	q.open++
	q.peakOpen = max(q.peakOpen, q.open)
	p.learnLocked(q, HostState{Answered: true})
	p.helloReputationLocked(q, s)
	p.fitSessionLocked(q, s, len(items))
	if d := s.depth(); s.groupCap > 0 && len(items) > d {
		p.requeueLocked(items[d:], false, nil) // (what its first window cannot carry)
		items = items[:d]
	}
	// At a host that counts connections in windows, a session started by
	// a timer (its window ending) is the only one kicked then: another
	// beside it, if the host's work and limits warrant one. (Elsewhere
	// new work kicks hosts; kicking here too opens parallel sessions a
	// process sharing the list with others does not need.)
	if q.hs.ConnsPerWindow > 0 {
		p.kick(q)
	}
	p.mu.Unlock()
	for {
		for _, it := range items {
			s.retrying = s.retrying || it.tries > 0 // (before this exchange's 4xx count)
		}
		if !p.exchange(q, s, items) {
			return p.endSession(q, s, sl)
		}
		p.mu.Lock()
		perSession := p.perSession(q)
		room := s.capacity(p.txPlanLocked(q, s, 0), perSession)
		if room <= 0 && (p.slowZoneLocked(q, s) || p.sleepOnLocked(q, s, sl)) {
			room = s.capacity(p.txPlanLocked(q, s, 0), perSession)
		}
		p.mu.Unlock()
		if room <= 0 {
			if s.rcpts < perSession && p.hasWork(q) {
				p.st.limits.Add(1) // the rejection or non-mail budget is spent
				p.mu.Lock()
				q.budgeted = true
				p.sampleLocked(q)
				p.mu.Unlock()
			}
			return p.endSession(q, s, sl)
		}
		if s.leaseEnding() {
			return p.endSession(q, s, sl) // the next session takes a new lease
		}
		if s.slowZone && !s.slowUntil.IsZero() && p.clk.Now().After(s.slowUntil) {
			return p.endSession(q, s, sl) // past the time its plan gave it: every reply sleeps
		}
		if s.unslotted {
			// Past the soft limit every reply waits the host's sleep: no
			// more RCPTs than are answered before the process's wait is
			// over (its greylisting retries come due then).
			if room = min(room, int(p.clk.Until(s.slowUntil)/s.errorSleep)); room <= 0 {
				return p.endSession(q, s, sl)
			}
		}
		if items = p.next(q, room, s.retrying); len(items) == 0 {
			return p.endSession(q, s, sl)
		}
	}
}

// lease takes a connection slot to tg and waits for the rate, within
// budget (zero: none). Its error is a *budgetError.
func (p *Prober) lease(k fleet.Key, budget time.Time, lim fleet.Limits) (*fleet.Lease, error) {
	ctx := context.Background()
	if !budget.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, budget)
		defer cancel()
	}
	lease, err := fleet.Take(ctx, p.cfg.Limiter, k, lim)
	if err != nil {
		return nil, &budgetError{fmt.Errorf("%w: no connection to %s possible before the deadline: %w", context.DeadlineExceeded, k.Host, err)}
	}
	return lease, nil
}

// fitSessionLocked applies what q taught to its new session s: the
// budgets it showed.
func (p *Prober) fitSessionLocked(q *hostQ, s *session, taken int) {
	if c := q.hs.RejectsPerSession; c > 0 && (s.rejectCap <= 0 || c < s.rejectCap) {
		s.rejectCap = c
	}
	if c := q.hs.NonmailPerSession; c > 0 && c < s.nonmailCap {
		s.nonmailCap = c
	}
	s.txRejCap = q.hs.RejectsPerTransaction
	s.group = p.groupLocked(q)
	p.planSessionLocked(q, s, taken)
	p.fitReputationLocked(q, s)
}

// slowZoneLocked lets a session to a Postfix host that counts connections
// in windows (anvil) go on past its rejection budget when it has spent it,
// work is left and no connection can be had before the host's next
// window: rather than wait with nothing open, it goes on into Postfix's
// slow zone (a second before every reply from smtpd_soft_error_limit, 10
// errors, on), stopping short of smtpd_hard_error_limit (20). It reports
// whether the session may go on.
func (p *Prober) slowZoneLocked(q *hostQ, s *session) bool {
	limit := q.hs.ConnsPerWindow
	if !s.rules.rejects || limit <= 0 || q.hs.RejectsPerSession > 0 || p.cfg.MaxRejectsPerSession <= 0 ||
		s.rejectCap >= postfixSlowZoneRejects || s.rejectRoom() > 0 || q.n == 0 {
		return false
	}
	now := p.clk.Now()
	windowSpent := q.winCount >= limit && now.Before(q.winStart.Add(p.cfg.RefusalWindow+windowMargin))
	if !now.Before(q.backoffUntil) && !windowSpent {
		return false // a new session can start now: cheaper than the slow zone
	}
	s.rejectCap = postfixSlowZoneRejects
	if !s.slowZone {
		q.slowing++
	}
	s.slowZone = true
	s.rules.watchSlow = false // its pauses are the ones we chose
	return true
}

// noteAcceptedLocked records a connection q accepted (for the rate it took
// when the host asks to slow down).
func (p *Prober) noteAcceptedLocked(q *hostQ, t time.Time) {
	q.accepted = p.noteDialLocked(q.accepted, t)
}

// noteDialLocked appends t to the connection times ts, keeping those
// within RefusalWindow and windowMargin of it (at most maxDials).
func (p *Prober) noteDialLocked(ts []time.Time, t time.Time) []time.Time {
	keep := ts[:0]
	for _, a := range ts {
		if t.Sub(a) < p.cfg.RefusalWindow+windowMargin {
			keep = append(keep, a)
		}
	}
	ts = append(keep, t)
	if len(ts) > maxDials {
		ts = ts[len(ts)-maxDials:]
	}
	return ts
}

// endSession ends s and reports whether q has more work for the next
// session. With none, the global slot goes before QUIT: others may start
// while this one says goodbye.
func (p *Prober) endSession(q *hostQ, s *session, sl *slot) bool {
	more := p.hasWork(q)
	if !more {
		p.letGo(sl)
	}
	p.mu.Lock()
	q.open-- // (before QUIT: see hostQ.open)
	p.mu.Unlock()
	s.end()
	p.mu.Lock()
	q.conns--
	if s.slowZone {
		q.slowing--
	}
	if s.unslotted {
		p.unslotted--
	}
	p.endReputationLocked(q, s)
	p.mu.Unlock()
	return more || p.hasWork(q)
}

func (p *Prober) hasWork(q *hostQ) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return q.n > 0
}

// next takes up to max items from q, waiting up to holdIdle for some.
func (p *Prober) next(q *hostQ, max int, retrying bool) []*item {
	p.mu.Lock()
	if items := p.take(q, max); len(items) > 0 || len(p.waitq) > 0 {
		// (Other hosts wait for a session slot: do not hold this one idle.)
		p.mu.Unlock()
		return items
	}
	q.idle++
	wake := q.wake
	hold := holdIdle
	longest := greyHold
	if q.hs.ConnsPerWindow > 0 {
		longest = p.cfg.RefusalWindow // its connections are scarcer than an idle session's time
	}
	if until := p.clk.Until(q.greyDue); retrying && q.greyWaiting > 0 && until > 0 &&
		(until <= longest || q.hs.ConnsPerWindow <= 0) {
		// A session sending a host's greylisting retries waits up to
		// greyHold for the next of them (they come due one after
		// another, as the first pass sent them): they go in this
		// session, not in a new one each time the queue runs dry between
		// them, however long the first pass took. (Not the first pass's
		// session: a deferral holds no session. At a windowed host, only
		// for retries that all come due within its window.)
		hold = min(until, longest) + holdIdle
	}
	p.mu.Unlock()
	t := p.clk.NewTimer(hold)
	select {
	case <-wake:
	case <-t.C():
	}
	t.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	q.idle--
	return p.take(q, max)
}

// hostFailed moves the items of a session that could not get a usable
// session, and everything else queued at the host, to their jobs' next MX
// host (or settles them when none is left).
func (p *Prober) hostFailed(q *hostQ, items []*item, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hostFailedLocked(q, items, err)
}

func (p *Prober) hostFailedLocked(q *hostQ, items []*item, err error) {
	p.st.hostFails.Add(1)
	silent := silentErr(err)
	all := append(items, p.take(q, q.n)...)
	for _, it := range all {
		if it.done {
			continue
		}
		it.job.targetFailedLocked(q.key, err, silent)
		it.job.requeueLocked(it, false, err)
	}
}

// requeue puts items back (see job.requeueLocked), in order: the front of
// a queue is a stack, so they go in last to first.
func (p *Prober) requeue(items []*item, dropped bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requeueLocked(items, dropped, err)
}

func (p *Prober) requeueLocked(items []*item, dropped bool, err error) {
	for i := len(items) - 1; i >= 0; i-- {
		items[i].job.requeueLocked(items[i], dropped, err)
	}
}

// noRouteRetry is how long items wait when no proxy is available, and
// noRouteTries how often they try before giving up.
const (
	noRouteRetry = 5 * time.Second
	noRouteTries = 3
)

// noRoute parks items that found no way out (every proxy set aside) for a
// while, then gives up on them.
func (p *Prober) noRoute(items []*item, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, it := range items {
		if it.done {
			continue
		}
		if it.drops++; it.drops >= noRouteTries {
			it.job.settleLocked(it, err)
			continue
		}
		p.deferLocked(it, p.clk.Now().Add(noRouteRetry))
	}
}

// abortJobs ends the jobs of items as if their contexts had ended.
func (p *Prober) abortJobs(items []*item, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, it := range items {
		if !it.job.finished {
			it.job.abortLocked(err)
		}
	}
}

// latestDeadline bounds a session's I/O on behalf of items: the latest
// of their jobs' deadlines, or zero when one has none.
func latestDeadline(items []*item) time.Time {
	var dl time.Time
	for _, it := range items {
		if it.job.deadline.IsZero() {
			return time.Time{}
		}
		if it.job.deadline.After(dl) {
			dl = it.job.deadline
		}
	}
	return dl
}

// deferLocked parks it in the timer heap until due.
func (p *Prober) deferLocked(it *item, due time.Time) {
	it.due, it.since = due, p.clk.Now()
	heap.Push(&p.deferred, it)
	p.armTimerLocked()
}

// unheapLocked removes a settled item from the timer heap.
func (p *Prober) unheapLocked(it *item) {
	if it.heapIx >= 0 {
		heap.Remove(&p.deferred, it.heapIx)
	}
	p.ungreyLocked(it)
}

// ungreyLocked ends it's wait on its host's greylisting.
func (p *Prober) ungreyLocked(it *item) {
	if q := it.greyQ; q != nil {
		q.greyWaiting--
		it.greyQ = nil
	}
}

func (p *Prober) armTimerLocked() {
	if len(p.deferred) == 0 {
		return
	}
	due := p.deferred[0].due
	if !p.timerAt.IsZero() && !p.timerAt.After(due) {
		return
	}
	p.timerAt = due
	if p.timer == nil {
		p.timer = p.clk.AfterFunc(p.clk.Until(due), p.onTimer)
	} else {
		p.timer.Reset(p.clk.Until(due))
	}
}

// onTimer sends the items that came due back to their hosts.
func (p *Prober) onTimer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timerAt = time.Time{}
	now := p.clk.Now()
	for len(p.deferred) > 0 && !p.deferred[0].due.After(now) {
		it := heap.Pop(&p.deferred).(*item)
		p.ungreyLocked(it)
		p.st.deferredNs.Add(int64(now.Sub(it.since)))
		p.st.retries.Add(1)
		it.job.requeueLocked(it, false, nil)
	}
	p.armTimerLocked()
}

// itemHeap orders deferred items by due time.
type itemHeap []*item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIx, h[j].heapIx = i, j
}
func (h *itemHeap) Push(x any) {
	it := x.(*item)
	it.heapIx = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.heapIx = -1
	return it
}
