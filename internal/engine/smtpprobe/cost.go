package smtpprobe

import (
	"math"
	"time"
)

// The cheapest way through a host's limits (issue 34, item 3). Neither a
// new connection nor an error sleep is free for a host: a host that
// limits connections (anvil's connections a window, its sessions at once,
// a learnt connection rate) makes every session past its budget wait; a
// host with an error sleep (Postfix's smtpd_soft_error_limit and
// smtpd_error_sleep_time) makes every reply of a session past its quiet
// budget wait, up to its hard limit (smtpd_hard_error_limit), where it
// closes the session. costModel holds one host's limits, learnt or
// assumed from its software, and plan picks, for the session about to
// start, the rejection budget that finishes the host's work soonest when
// every later session keeps to it; among the budgets finishing within
// planSlack of the soonest, the one needing the fewest sessions. The plan
// is made again at every session's start, with the work then left and the
// share of refused recipients seen so far, so a host's sessions may take
// more errors while its connections are scarce and none once the work
// left fits the connections it still allows.
//
// Reputation-style delays (every reply slowed after unknown recipients,
// whatever the session) are reputation.go's: learnt per host, spread over
// the egress identities, and the cost of another session at a host that
// delays every reply. Partial: the learnt ErrorSleep and HardErrors stay
// in this process's HostMemory (the fleet's HostLimits do not carry them).

// planSlack: a budget whose plan finishes within this factor of the
// soonest (of the host's whole span) is as good, and the one with the
// fewest sessions wins. Time the process waits anyway is as good too
// (costState.idle, idleAheadLocked): a host that takes any number of
// connections still counts each one, and while the process waits for
// other hosts' greylisting retries, error sleeps that end before those
// retries come due cost nobody anything, as long as the sleeping
// session holds no global slot (sleepOnLocked). (Stretching every
// host's work to the list's last greylisting retry, sleeping sessions
// holding their slots, was tried: they held the slots the greylisting
// hosts' first passes needed, and their retries came later.)
const planSlack = 1.05

// costModel is one host's limits as a planner sees them.
type costModel struct {
	conns     int           // sessions at once
	sleeping  int           // sessions at once while some sleep past quiet (0: conns)
	perWindow int           // connections a window (0: none known)
	window    time.Duration // the window's length
	interval  time.Duration // between new connections past burst (0: no rate)
	burst     int
	quiet     int           // rejections a session takes before the host sleeps before its replies
	most      int           // rejections a session may take: one short of the host's hard limit
	sleep     time.Duration // the host's sleep before each reply past quiet
	base      time.Duration // a session's time without error sleeps
}

// costState is where the host's limits stand as a session starts: the
// session itself holds a slot and its window's connection.
type costState struct {
	left    int           // connections left in the current window (after this session's)
	winEnd  time.Duration // the current window ends this long from now
	busy    int           // slots other sessions hold
	busyFor time.Duration // about how long they still hold them
	elapsed time.Duration // since the host's first session started: planSlack is of the whole span
	// idle: the host's work may take this long from now at no cost to
	// the process (see idleAheadLocked); 0: only planSlack.
	idle time.Duration
	// spent: the rejections the session took already, its quiet budget
	// spent (sleepOnLocked); 0: the session is about to start.
	spent int
}

// sessionPlan is a rejection budget a session and what it costs the host:
// the sessions it takes and when the last ends, from now.
type sessionPlan struct {
	cap, sessions int
	finish        time.Duration
}

// sessionTime is a session's time with cap rejections at a host that
// refuses share of the recipients: once past quiet, every reply waits
// the host's sleep, accepted recipients' replies and QUIT's too. It is
// how long the session holds one of the host's slots.
func (m costModel) sessionTime(cap int, share float64) time.Duration {
	if cap <= m.quiet || m.sleep <= 0 {
		return m.base
	}
	held := math.Ceil(float64(cap-m.quiet)/share) + 1
	return m.base + time.Duration(held)*m.sleep
}

// workTime is when a session's last RCPT reply comes, from its start:
// its sessionTime but for the sleep before the reply to QUIT, which
// holds the host's slot but no verdict.
func (m costModel) workTime(cap int, share float64) time.Duration {
	t := m.sessionTime(cap, share)
	if cap > m.quiet && m.sleep > 0 {
		t -= m.sleep
	}
	return t
}

// finish is when the host's work ends (its last RCPT reply), from now,
// and the sessions it
// takes, when the sessions in the current window (this one, starting now,
// among them) take up to now rejections each and those of later windows
// up to later, rejects in all.
func (m costModel) finish(rejects, now, later int, share float64, st costState) (time.Duration, int) {
	slots := make([]time.Duration, max(1, m.conns, m.sleeping))
	for i := range min(st.busy, len(slots)-1) {
		slots[i+1] = st.busyFor
	}
	slots[0] = m.sessionTime(now, share) // this session
	end, k := m.workTime(now, share), 1
	if st.spent > 0 {
		// An open session past its setup and its quiet rejections: what
		// is left of it is its sleeps.
		slots[0], end = slots[0]-m.base, max(0, end-m.base)
	}
	left, wStart, wEnd, current := st.left, time.Duration(0), st.winEnd, true
	for rejects -= now - st.spent; rejects > 0; k++ {
		earliest := time.Duration(0)
		if m.perWindow > 0 {
			if left <= 0 {
				wStart, wEnd, left, current = wEnd, wEnd+m.window, m.perWindow, false
			}
			left--
			earliest = wStart
		}
		if m.interval > 0 && k >= m.burst {
			earliest = max(earliest, time.Duration(k-m.burst+1)*m.interval)
		}
		c := now
		if !current {
			c = later
		}
		c = min(c, rejects)
		j := 0
		for s := range slots[:m.slots(c)] {
			if slots[s] < slots[j] {
				j = s
			}
		}
		start := max(earliest, slots[j])
		slots[j] = start + m.sessionTime(c, share)
		end = max(end, start+m.workTime(c, share))
		rejects -= c
	}
	return end, k
}

// slots is the number of sessions at once a session with a budget of cap
// rejections may be one of: more when it sleeps past quiet (sleeping).
func (m costModel) slots(cap int) int {
	if cap > m.quiet && m.sleeping > m.conns {
		return m.sleeping
	}
	return max(1, m.conns)
}

// plan picks the rejection budget of the next session for rcpts
// recipients of which share are expected to be refused: one for the
// sessions of the host's current connection window, another for those of
// later windows (the same when the host counts no windows).
func (m costModel) plan(rcpts int, share float64, st costState) sessionPlan {
	share = min(max(share, 0.02), 1)
	rejects := max(1, int(math.Ceil(float64(rcpts)*share)))
	lo, hi := max(1, m.quiet, st.spent), max(m.quiet, m.most)
	var all []sessionPlan
	best := -1
	for now := lo; now <= hi; now++ {
		for later := lo; later <= hi; later++ {
			if m.perWindow <= 0 && later != now {
				continue
			}
			f, k := m.finish(rejects, now, later, share, st)
			all = append(all, sessionPlan{cap: now, sessions: k, finish: f})
			if best < 0 || f < all[best].finish {
				best = len(all) - 1
			}
		}
	}
	pick := all[best]
	for _, p := range all {
		if p.finish > st.idle && float64(st.elapsed+p.finish) > planSlack*float64(st.elapsed+all[best].finish) {
			continue
		}
		if p.sessions < pick.sessions || (p.sessions == pick.sessions && m.before(p, pick, st.idle)) {
			pick = p
		}
	}
	return pick
}

// before reports whether plan a is to be preferred to b, as many
// sessions: the sooner, but of two that end while the process waits
// anyway (idle), the larger budget, which leaves the least work to
// later sessions when the share of refused recipients planned with,
// taken from the host's first replies, is off.
func (m costModel) before(a, b sessionPlan, idle time.Duration) bool {
	if a.finish <= idle && b.finish <= idle {
		return a.cap > b.cap
	}
	return a.finish < b.finish
}

// hardErrors is the number of errors after which q closes a session
// (learnt, or Postfix's default for a server that names itself so); 0:
// unknown.
func hardErrors(q *hostQ, s *session) int {
	if h := q.hs.HardErrors; h > 0 {
		return h
	}
	if s.rules.rejects {
		return postfixHardErrors
	}
	return 0
}

// errorSleep is q's sleep before each reply past its quiet budget.
func errorSleep(q *hostQ, s *session) time.Duration {
	if d := q.hs.ErrorSleep; d > 0 {
		return d
	}
	if s.rules.rejects {
		return postfixErrorSleep
	}
	return 0
}

// quietRounds: the round trips of a session past its setup without
// error sleeps (a window or two and QUIT), for the cost model.
const quietRounds = 3

// priorRejectShare is the share of refused recipients assumed at a host
// before its replies say.
const priorRejectShare = 0.5

// costModelLocked is q's model as session s starts, with s's rejection
// budget as the quiet one.
func (p *Prober) costModelLocked(q *hostQ, s *session) (costModel, bool) {
	hard, sleep := hardErrors(q, s), errorSleep(q, s)
	if s.rejectCap <= 0 || hard <= 0 || sleep <= 0 || hard-1 <= s.rejectCap {
		return costModel{}, false
	}
	m := costModel{conns: p.maxConns(q) * p.routes(), sleeping: p.sleepingConns(q) * p.routes(), quiet: s.rejectCap, most: hard - 1, sleep: sleep,
		base: s.setup + quietRounds*s.helloRTT, burst: p.burst(q)}
	if w := q.hs.ConnsPerWindow; w > 0 {
		m.perWindow, m.window = w, p.cfg.RefusalWindow+windowMargin
	} else if r := p.connRate(q); r > 0 {
		m.interval = time.Duration(float64(time.Second) / r)
	}
	return m, true
}

// planSessionLocked sets the rejection budget of s, a session to q about
// to start, to the one its host's cost model finds cheapest.
func (p *Prober) planSessionLocked(q *hostQ, s *session, taken int) {
	m, ok := p.costModelLocked(q, s)
	if !ok {
		return
	}
	st, share := p.costStateLocked(q, m)
	pl := m.plan(q.n+taken, share, st)
	p.applyPlanLocked(q, s, m, pl, share, 0)
}

// sleepOnLocked lets s, a session to q that has spent its quiet
// rejection budget with work left, go on past it into the host's error
// sleeps when the cost model, planning q's work left with s as one of
// its sessions, finds that cheapest: at a host that takes any number of
// connections, while the process has time to wait anyway
// (idleAheadLocked), the sleeps of one session cost less than another
// connection. It reports whether s may go on.
func (p *Prober) sleepOnLocked(q *hostQ, s *session, sl *slot) bool {
	if s.slowZone || s.rejectRoom() > 0 || q.n == 0 {
		return false
	}
	m, ok := p.costModelLocked(q, s)
	if !ok {
		return false
	}
	st, _ := p.costStateLocked(q, m)
	share := float64(q.nRejected) / float64(max(q.nRcpts, 1)) // (its rejections at least)
	if st.idle = p.idleAheadLocked(q); st.idle <= 0 {
		return false
	}
	st.spent = s.rejects
	pl := m.plan(q.n, share, st)
	if !p.applyPlanLocked(q, s, m, pl, share, st.idle) {
		return false
	}
	// Sleeping, it holds no global slot: it costs the process no worker
	// and holds no other host back (bounded by maxUnslotted).
	s.unslotted = true
	p.unslotted++
	if sl.held {
		sl.held = false
		p.open--
		p.serveWaitqLocked()
	}
	// The host's quiet budget is met with work left, as when a session
	// ends there: its other sessions of the plan may start beside it.
	q.budgeted = true
	p.sampleLocked(q)
	return true
}

// costStateLocked is where q's limits stand now, for its cost model m,
// and the share of refused recipients to plan with.
func (p *Prober) costStateLocked(q *hostQ, m costModel) (costState, float64) {
	now := p.clk.Now()
	st := costState{busy: q.sessions - 1, busyFor: m.base}
	if !q.first.IsZero() {
		st.elapsed = now.Sub(q.first)
	}
	if m.perWindow > 0 {
		st.left, st.winEnd = m.perWindow, m.window
		if !q.winStart.IsZero() && now.Before(q.winStart.Add(m.window)) {
			st.left, st.winEnd = m.perWindow-q.winCount, q.winStart.Add(m.window).Sub(now)
		}
	}
	share := priorRejectShare
	if q.nRcpts >= minShareSample {
		share = float64(q.nRejected) / float64(q.nRcpts)
	}
	return st, share
}

// applyPlanLocked gives s the budget of pl when it takes s past its
// quiet one into the host's error sleeps, and reports whether it did.
//
// The session ends once past the time the plan gave it (the share of
// refused recipients it planned with may be off: every reply sleeps),
// or, going on while the process waits anyway (idle), once that time
// is over.
func (p *Prober) applyPlanLocked(q *hostQ, s *session, m costModel, pl sessionPlan, share float64, idle time.Duration) bool {
	if pl.cap <= s.rejectCap {
		return false
	}
	left := m.sessionTime(pl.cap, share) + m.sleep
	if idle > 0 {
		left = idle - m.sleep // (the sleep before QUIT's reply within it)
	}
	s.rejectCap = pl.cap
	s.slowZone, s.errorSleep = true, m.sleep
	s.slowUntil = p.clk.Now().Add(left)
	q.slowing++
	s.rules.watchSlow = false // its pauses are the ones we chose
	return true
}

// idleAheadLocked is how long from now q's work may take at no cost to
// the process: until the first of the addresses deferred for a retry
// (other hosts' greylisting, mostly) comes due, as the process waits
// for them anyway. Zero when q itself deferred an address (its retries
// come due after its first pass: sleeping there makes them later), when
// none waits, or when maxUnslotted sessions sleep already.
func (p *Prober) idleAheadLocked(q *hostQ) time.Duration {
	if q.nDeferred > 0 || q.greyWaiting > 0 || p.unslotted >= p.maxUnslotted() || len(p.deferred) == 0 {
		return 0
	}
	return max(0, p.clk.Until(p.deferred[0].due))
}

// maxUnslotted bounds the sessions sleeping through their hosts' errors
// without a global slot (sleepOnLocked): Config.MaxSleepingSessions, none
// when it is -1.
func (p *Prober) maxUnslotted() int {
	return max(0, p.cfg.MaxSleepingSessions)
}

// SleepingSessions is the default of Config.MaxSleepingSessions for a
// process with maxSessions session slots: half as many again, so that
// sleeping sessions never outnumber the working ones' room.
func SleepingSessions(maxSessions int) int {
	return max(1, maxSessions/2)
}

// minShareSample: the recipients a host must have answered before its
// share of refusals replaces priorRejectShare.
const minShareSample = 10

// noHardLimitSpan bounds the errors past the soft limit LimitsFloor
// tries for a session at a host with no hard limit.
const noHardLimitSpan = 64

// ServerLimits is a host's own configuration as a benchmark that built
// the host knows it, for LimitsFloor. A zero field is no limit.
type ServerLimits struct {
	Conns                  int           // sessions at once
	PerWindow              int           // connections a window (anvil)
	Window                 time.Duration // its length
	RcptsPerSession        int           // RCPTs a session
	SoftErrors, HardErrors int           // errors before the error sleep; errors after which a session is closed
	ErrorSleep             time.Duration // the sleep before every reply past SoftErrors
	Session                time.Duration // a session's time without error sleeps (greeting, EHLO, its round trips)
}

// LimitsFloor is the soonest the host's limits let work of rcpts
// recipients, rejects of them refused, end (from its first session's
// start), with the sessions that plan takes, and the fewest sessions the
// limits allow at all: the floor and the least connections a benchmark
// prints beside what an engine took. It uses the cost model the prober
// plans sessions with, knowing what the prober only learns.
func LimitsFloor(l ServerLimits, rcpts, rejects int) (floor time.Duration, sessions, least int) {
	floor, sessions, _, least = limitsPlans(l, rcpts, rejects, 0)
	return floor, sessions, least
}

// LimitsFewestBy is the fewest sessions of the plans the host's limits
// allow for the same work that end within by of the first session's
// start, and whether any does (if none, the soonest plan's sessions):
// what a verifier that is to finish by then needs at least.
func LimitsFewestBy(l ServerLimits, rcpts, rejects int, by time.Duration) (sessions int, ok bool) {
	_, soonest, fewest, _ := limitsPlans(l, rcpts, rejects, by)
	if fewest > 0 {
		return fewest, true
	}
	return soonest, false
}

// limitsPlans tries every plan of the cost model for l's host: the
// soonest end and its sessions, the fewest sessions of a plan ending
// within by (0: none does), and the fewest the limits allow at all.
func limitsPlans(l ServerLimits, rcpts, rejects int, by time.Duration) (floor time.Duration, sessions, fewestBy, least int) {
	rcpts, rejects = max(rcpts, 1), min(max(rejects, 0), max(rcpts, 1))
	least = 1
	if l.RcptsPerSession > 0 {
		least = max(least, (rcpts+l.RcptsPerSession-1)/l.RcptsPerSession)
	}
	if l.SoftErrors > 0 && l.HardErrors > 1 {
		least = max(least, (rejects+l.HardErrors-2)/(l.HardErrors-1))
	}
	m := costModel{conns: l.Conns, perWindow: l.PerWindow, window: l.Window, sleep: l.ErrorSleep, base: l.Session}
	if m.conns <= 0 {
		m.conns = least + rejects + 1 // no limit: as many at once as there are sessions
	}
	st := costState{left: l.PerWindow - 1, winEnd: l.Window}
	try := func(f time.Duration, k int) {
		if f < floor || (f == floor && k < sessions) {
			floor, sessions = f, k
		}
		if f <= by && (fewestBy == 0 || k < fewestBy) {
			fewestBy = k
		}
	}
	floor = time.Duration(math.MaxInt64)
	if rejects == 0 || l.SoftErrors <= 0 || l.ErrorSleep <= 0 {
		// Errors cost nothing: the fewest sessions, as the connection
		// limits let them start.
		m.quiet, m.most = 1, 1
		try(m.finish(least, 1, 1, 1, st))
		return floor, sessions, fewestBy, least
	}
	share := float64(rejects) / float64(rcpts)
	m.quiet, m.most = l.SoftErrors-1, min(rejects, l.SoftErrors-1+noHardLimitSpan)
	if l.HardErrors > 1 {
		m.most = max(m.quiet, l.HardErrors-1)
	}
	if l.RcptsPerSession > 0 {
		m.most = max(1, min(m.most, int(float64(l.RcptsPerSession)*share)))
		m.quiet = min(m.quiet, m.most)
	}
	for now := m.quiet; now <= m.most; now++ {
		for later := m.quiet; later <= m.most; later++ {
			try(m.finish(rejects, now, later, share, st))
		}
	}
	return floor, sessions, fewestBy, least
}
