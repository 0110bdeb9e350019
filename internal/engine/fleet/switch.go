package fleet

import (
	"context"
	"sync"
	"time"
)

// Fleet is the Limiter and Learnt of a process with --fleet-url: the
// shared backend while it answers, the divided budget (Turns over
// Options.Share) and an in-process memory while it does not. Never
// unlimited:
//
//   - Backend unreachable (FailAfter health checks in a row, every
//     HealthInterval): the shared leases are lost at once (the engine
//     ends their sessions) and the divided budget starts LeaseTTL and a
//     HealthInterval later, when every other process's leases have
//     expired or been given up.
//   - Backend back: the first process to see it sets a shared resume time
//     (LeaseTTL + 2 HealthIntervals ahead). Every process in the fallback
//     says so in the backend's stale set at each check, keeps its divided
//     budget until the resume time (a timer at that time), then ends its
//     divided sessions and leaves the stale set once its last divided
//     lease is released. Shared leases, in every process, wait for the
//     resume time and for the stale set to be empty: an acknowledgement,
//     not a margin, so a process starved past its timer holds the others
//     back instead of overlapping them. A mark not renewed for a LeaseTTL
//     (a process that died) is not waited for.
//   - Backend restarted without its data (its epoch key changed or
//     vanished): the shared leases are lost and new ones wait for the
//     resume time, so leases the restart wiped are given up first.
//   - Backend first used (no epoch key, as after a restart, but no process
//     says it held leases): the resume time is dropped after 4
//     HealthIntervals (waivable), not waited out.
//
// What it cannot see: a process cut off from a backend that others still
// reach uses its divided share while they use the whole budget (at most
// the budget plus that share), and in the HealthInterval after a restart
// a process that has not checked yet may take a slot whose wiped holder
// still runs.
type Fleet struct {
	r     *Redis       // nil on a Memory backend
	b     fleetBackend // r, or a Memory's client
	turns *Turns
	local *Local
	o     Options
	st    *counters
	// OnMode, when set, hears of every switch (for logs); set it before
	// the Fleet is used.
	OnMode func(m Mode, why string)

	mu           sync.Mutex
	mode         Mode
	fails        int
	epoch        string
	pauseUntil   time.Time // shared leases wait until then
	waived       time.Time // a resume time this process dropped early (waivable)
	readyAt      time.Time // divided leases wait until then
	since        time.Time // when the fallback began
	fallbackTime time.Duration
	changed      chan struct{} // closed at each switch
	divided      map[*Lease]struct{}
	staleLive    int       // processes in the stale set at the last check
	checkedAt    time.Time // the last check that reached the backend
	stop         context.CancelFunc
	done         chan struct{}
}

func newFleet(ctx context.Context, r *Redis, b fleetBackend, o Options) *Fleet {
	f := &Fleet{
		r: r, b: b, turns: NewTurns(o.Share, o.Clock), local: NewLocal(o.StateSize, o.Clock), o: o, st: b.counters(),
		mode: ModeShared, changed: make(chan struct{}), divided: map[*Lease]struct{}{}, done: make(chan struct{}),
	}
	// The first check decides the starting mode; an unreachable backend
	// starts the divided budget after LeaseTTL, as if it had just gone.
	f.fails = o.FailAfter - 1
	f.tick(ctx)
	var cctx context.Context
	cctx, f.stop = context.WithCancel(context.WithoutCancel(ctx))
	go f.loop(cctx)
	return f
}

var _ Limiter = (*Fleet)(nil)
var _ Learnt = (*Fleet)(nil)

// Close stops the health checks and closes the backend's connections.
func (f *Fleet) Close() error {
	f.stop()
	<-f.done
	return f.b.Close()
}

// Backend is the Redis backend (the verification history may share its
// connections); nil on a Memory.
func (f *Fleet) Backend() *Redis { return f.r }

// Mode reports where the limits hold now.
func (f *Fleet) Mode() Mode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode
}

// Share is the divided share used while the backend is unreachable.
func (f *Fleet) Share() Share { return f.turns.Share() }

// Stats returns a snapshot of the counters.
func (f *Fleet) Stats() Stats {
	f.mu.Lock()
	fb := f.fallbackTime
	if f.mode == ModeFallback {
		fb += f.o.Clock.Since(f.since)
	}
	f.mu.Unlock()
	return Stats{
		LeaseWaits: f.st.leaseWaits.Load(), LeaseWaitTime: time.Duration(f.st.leaseWaitNs.Load()),
		RateWaits: f.st.rateWaits.Load(), LeasesLost: f.st.leasesLost.Load(),
		Fallbacks: f.st.fallbacks.Load(), FallbackTime: fb, BackendErrors: f.st.backendErrors.Load(),
	}
}

// Counters returns the counters for shard summaries and metrics.
func (f *Fleet) Counters() map[string]float64 { return f.Stats().Counters() }

func (f *Fleet) loop(ctx context.Context) {
	defer close(f.done)
	t := f.o.Clock.NewTicker(f.o.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			f.tick(ctx)
		}
	}
}

func (f *Fleet) settle() time.Duration { return f.o.LeaseTTL + 2*f.o.HealthInterval }

// tick checks the backend once and switches modes as the rules say.
func (f *Fleet) tick(ctx context.Context) {
	f.mu.Lock()
	mode, epoch, holding := f.mode, f.epoch, len(f.divided) > 0
	needResume := f.mode == ModeFallback && f.pauseUntil.IsZero()
	f.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, max(f.o.HealthInterval, time.Second))
	h, err := f.b.check(cctx, f.settle())
	if err == nil && needResume {
		// Back: agree on when every process switches (once: a resume
		// time agreed on is kept, or processes would chase new ones).
		if err = f.b.setResume(cctx, f.settle()); err == nil {
			h, err = f.b.check(cctx, f.settle())
		}
	}
	divided, wiped := mode == ModeFallback || holding, epoch != "" && h.epoch != epoch
	if err == nil && (divided || wiped) {
		// Divided leases (still held after the switch too), or shared
		// ones a restart wiped: no process may take shared leases yet,
		// nor end the pause early (waivable).
		if err = f.b.markStale(cctx, 2*f.settle()); err == nil && mode == ModeFallback {
			h.stale = max(h.stale, 1)
		}
		if err == nil && divided && !wiped && f.dividedDone() {
			// The switch back, or the release of the last divided lease,
			// came while this check was out, and its leaveStale maybe
			// before this mark: left there, the mark would hold every
			// process's shared leases back a LeaseTTL.
			err = f.b.leaveStale(cctx)
		}
	}
	cancel()
	if ctx.Err() != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.st.backendErrors.Add(1)
		if f.fails++; f.fails >= f.o.FailAfter && f.mode == ModeShared {
			f.toFallbackLocked("the fleet backend does not answer: " + err.Error())
		}
		return
	}
	f.fails = 0
	now := f.o.Clock.Now()
	blocked := f.staleBlockedLocked(now)
	f.staleLive, f.checkedAt = h.stale, now
	if blocked && !f.staleBlockedLocked(now) {
		f.signalLocked() // the stale set emptied: shared leases may go on
	}
	if f.epoch != "" && h.epoch != f.epoch && f.mode == ModeShared {
		f.b.loseAll() // their keys are gone with the old epoch
		f.note(ModeShared, "the fleet backend restarted without its data; shared leases resume after "+f.settle().String())
	}
	f.epoch = h.epoch
	if h.resumeAt.After(now) && h.resumeAt.After(f.pauseUntil) && !h.resumeAt.Equal(f.waived) {
		f.pauseUntil = h.resumeAt
		f.signalLocked()
		if f.mode == ModeFallback {
			// Switch at the agreed time itself, not at the next health
			// check (late on a busy machine), so that every process gives
			// up its divided leases together, before shared ones are taken.
			at := f.pauseUntil
			f.o.Clock.AfterFunc(f.o.Clock.Until(at), func() { f.resumeAt(at) })
		}
	}
	if f.mode == ModeShared && f.pauseUntil.After(now) && f.pauseUntil.Equal(h.resumeAt) && f.waivable(h, now) {
		f.waived, f.pauseUntil = f.pauseUntil, time.Time{}
		f.signalLocked()
	}
	// The switch back waits for a resume time every process agreed on.
	if f.mode == ModeFallback && !f.pauseUntil.IsZero() && !now.Before(f.pauseUntil) {
		f.toSharedLocked()
	}
}

// dividedDone reports whether this process is back in shared mode and
// holds no divided lease: it has nothing to keep in the stale set.
func (f *Fleet) dividedDone() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode == ModeShared && len(f.divided) == 0
}

// waivable reports whether a shared-mode process may drop the pending
// resume time h.resumeAt early: it was set 4 HealthIntervals ago or more,
// and no process has said since (from a settle before it on) that it may
// hold leases the current epoch does not count (Redis.markStale). Every
// process that held any checks every HealthInterval and says so at its
// first check after a restart or while in the fallback; so on a backend
// first used (a new Redis or key prefix: no epoch yet) new leases start
// after about 4 HealthIntervals, not the whole settle (issue 22: 6.75 s of
// a 70 s list). A holder that has not checked for 4 HealthIntervals (a
// stalled process) is not waited for.
func (f *Fleet) waivable(h health, now time.Time) bool {
	setAt := h.resumeAt.Add(-f.settle())
	return !now.Before(setAt.Add(4*f.o.HealthInterval)) && h.lastStale.Before(setAt.Add(-f.settle()))
}

// resumeAt switches back to shared leases at the agreed time at, unless
// the mode or the agreement changed since.
func (f *Fleet) resumeAt(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// Not while the last check failed: the backend that agreed on the
	// resume time has gone again; the next check that reaches it switches.
	if f.mode == ModeFallback && f.pauseUntil.Equal(at) && f.fails == 0 {
		f.toSharedLocked()
	}
}

func (f *Fleet) toFallbackLocked(why string) {
	f.mode = ModeFallback
	f.since = f.o.Clock.Now()
	// Every other process's shared leases end by LeaseTTL (most by half of
	// it, see Redis.hold); a HealthInterval more covers a session's cut on
	// a busy machine.
	f.readyAt = f.since.Add(f.o.LeaseTTL + f.o.HealthInterval)
	f.pauseUntil = time.Time{}
	f.st.fallbacks.Add(1)
	f.b.loseAll()
	f.signalLocked()
	f.note(ModeFallback, why)
}

func (f *Fleet) toSharedLocked() {
	f.mode = ModeShared
	f.fallbackTime += f.o.Clock.Since(f.since)
	// The divided sessions end now; each lease leaves f.divided when its
	// session releases it, and the last one takes this process out of the
	// stale set (keepDivided).
	for l := range f.divided {
		f.st.leasesLost.Add(1)
		l.markLost()
	}
	if len(f.divided) == 0 {
		go f.leaveStale()
	}
	f.signalLocked()
	f.note(ModeShared, "the fleet backend answers again")
}

func (f *Fleet) note(m Mode, why string) {
	if f.OnMode != nil {
		go f.OnMode(m, why)
	}
}

func (f *Fleet) signalLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// noteError counts a failed backend call; enough of them in a row switch
// to the fallback without waiting for the next health check.
func (f *Fleet) noteError(err error) {
	if !IsBackendError(err) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails++; f.fails >= f.o.FailAfter && f.mode == ModeShared {
		f.toFallbackLocked("the fleet backend does not answer: " + err.Error())
	}
}

// state is what an Acquire or Wait must do now: wait for notBefore, or,
// when stale, for the stale set to empty (a switch, or a check, closes
// changed).
func (f *Fleet) state() (mode Mode, notBefore time.Time, stale bool, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mode == ModeShared {
		return f.mode, f.pauseUntil, f.staleBlockedLocked(f.o.Clock.Now()), f.changed
	}
	return f.mode, f.readyAt, false, f.changed
}

// staleBlockedLocked reports whether shared leases wait for other
// processes' divided leases (or this one's own) to be given up: the stale
// set was not empty at the last check, or there was no check since the
// resume time (a process's mark made just before it is seen).
func (f *Fleet) staleBlockedLocked(now time.Time) bool {
	if f.mode != ModeShared {
		return false
	}
	if f.staleLive > 0 || len(f.divided) > 0 {
		return true
	}
	return !f.pauseUntil.IsZero() && !now.Before(f.pauseUntil) && f.checkedAt.Before(f.pauseUntil)
}

// leaveStale takes this process out of the backend's stale set once it
// holds no divided lease in shared mode. A failure leaves the mark to
// age out (a LeaseTTL).
func (f *Fleet) leaveStale() {
	f.mu.Lock()
	ok := f.mode == ModeShared && len(f.divided) == 0
	f.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(f.o.HealthInterval, time.Second))
	defer cancel()
	if err := f.b.leaveStale(ctx); err != nil {
		f.noteError(err)
	}
}

// hold waits, when an Acquire or Wait must (wait true), for notBefore, or
// while stale for the next check (every HealthInterval); a switch or a
// check that saw the stale set empty ends the wait early.
func (f *Fleet) hold(ctx context.Context, notBefore time.Time, stale bool, changed <-chan struct{}) (wait bool, err error) {
	now := f.o.Clock.Now()
	switch {
	case now.Before(notBefore):
		return true, f.until(ctx, notBefore, changed)
	case stale:
		return true, f.until(ctx, now.Add(f.o.HealthInterval), changed)
	}
	return false, nil
}

// until waits for t, a switch or ctx; it reports whether to go on.
func (f *Fleet) until(ctx context.Context, t time.Time, changed <-chan struct{}) error {
	d := f.o.Clock.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := f.o.Clock.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C():
	case <-changed:
	case <-ctx.Done():
	}
	return ctx.Err()
}

// within runs call with a context that also ends at the next switch.
func within[T any](ctx context.Context, changed <-chan struct{}, call func(context.Context) (T, error)) (T, error, bool) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-changed:
			cancel()
		case <-cctx.Done():
		}
	}()
	v, err := call(cctx)
	switched := err != nil && ctx.Err() == nil && cctx.Err() != nil
	return v, err, switched
}

// Acquire implements Limiter: a shared lease, or a divided one in the
// fallback; a switch while waiting starts over in the new mode.
func (f *Fleet) Acquire(ctx context.Context, k Key, lim Limits) (*Lease, error) {
	for {
		mode, notBefore, stale, changed := f.state()
		if wait, err := f.hold(ctx, notBefore, stale, changed); wait || err != nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		if mode == ModeShared {
			l, err, switched := within(ctx, changed, func(c context.Context) (*Lease, error) { return f.b.Acquire(c, k, lim) })
			if err == nil {
				return l, nil
			}
			if !switched && !IsBackendError(err) {
				return nil, err
			}
			f.noteError(err)
			if err := f.until(ctx, f.o.Clock.Now().Add(f.o.HealthInterval), changed); err != nil {
				return nil, err
			}
			continue
		}
		l, err, switched := within(ctx, changed, func(c context.Context) (*Lease, error) { return f.turns.Acquire(c, k, lim) })
		if switched {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !f.keepDivided(l, changed) {
			l.Release()
			continue
		}
		return l, nil
	}
}

// keepDivided registers a divided lease unless the mode switched since it
// was asked for.
func (f *Fleet) keepDivided(l *Lease, changed <-chan struct{}) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-changed:
		return false
	default:
	}
	f.divided[l] = struct{}{}
	inner := l.release
	l.release = func() {
		inner()
		f.mu.Lock()
		delete(f.divided, l)
		last := f.mode == ModeShared && len(f.divided) == 0
		f.mu.Unlock()
		if last {
			go f.leaveStale() // the switch's last divided session ended
		}
	}
	return true
}

// Wait implements Limiter.
func (f *Fleet) Wait(ctx context.Context, k Key, lim Limits) error {
	for {
		// Not the stale set: a session Waits holding its lease, maybe a
		// divided one the stale set waits for.
		mode, notBefore, _, changed := f.state()
		if wait, err := f.hold(ctx, notBefore, false, changed); wait || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		var lm Limiter = f.turns
		if mode == ModeShared {
			lm = f.b
		}
		_, err, switched := within(ctx, changed, func(c context.Context) (struct{}, error) { return struct{}{}, lm.Wait(c, k, lim) })
		if err == nil {
			return nil
		}
		if switched {
			continue
		}
		if mode == ModeShared && IsBackendError(err) {
			f.noteError(err)
			if err := f.until(ctx, f.o.Clock.Now().Add(f.o.HealthInterval), changed); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// learnt is the state to use now.
func (f *Fleet) learnt() Learnt {
	if f.Mode() == ModeShared {
		return f.b
	}
	return f.local
}

// CatchAll implements Learnt. Reads that fail fall back to the in-process
// memory; writes go to both, so lessons learnt survive a switch.
func (f *Fleet) CatchAll(ctx context.Context, domain string) (bool, bool, error) {
	if l := f.learnt(); l != Learnt(f.local) {
		v, ok, err := l.CatchAll(ctx, domain)
		if err == nil {
			return v, ok, nil
		}
		f.noteError(err)
	}
	return f.local.CatchAll(ctx, domain)
}

// SetCatchAll implements Learnt.
func (f *Fleet) SetCatchAll(ctx context.Context, domain string, catchAll bool, ttl time.Duration) error {
	_ = f.local.SetCatchAll(ctx, domain, catchAll, ttl)
	return f.shared(func(l Learnt) error { return l.SetCatchAll(ctx, domain, catchAll, ttl) })
}

// Penalty implements Learnt.
func (f *Fleet) Penalty(ctx context.Context, k Key) (Penalty, bool, error) {
	if l := f.learnt(); l != Learnt(f.local) {
		p, ok, err := l.Penalty(ctx, k)
		if err == nil {
			return p, ok, nil
		}
		f.noteError(err)
	}
	return f.local.Penalty(ctx, k)
}

// SetPenalty implements Learnt.
func (f *Fleet) SetPenalty(ctx context.Context, k Key, p Penalty, ttl time.Duration) error {
	_ = f.local.SetPenalty(ctx, k, p, ttl)
	return f.shared(func(l Learnt) error { return l.SetPenalty(ctx, k, p, ttl) })
}

// ClearPenalty implements Learnt.
func (f *Fleet) ClearPenalty(ctx context.Context, k Key) error {
	_ = f.local.ClearPenalty(ctx, k)
	return f.shared(func(l Learnt) error { return l.ClearPenalty(ctx, k) })
}

// HostLimits implements Learnt.
func (f *Fleet) HostLimits(ctx context.Context, k Key) (HostLimits, error) {
	local, _ := f.local.HostLimits(ctx, k)
	if l := f.learnt(); l != Learnt(f.local) {
		h, err := l.HostLimits(ctx, k)
		if err == nil {
			return h.merge(local), nil
		}
		f.noteError(err)
	}
	return local, nil
}

// LowerHostLimits implements Learnt.
func (f *Fleet) LowerHostLimits(ctx context.Context, k Key, h HostLimits, ttl time.Duration) error {
	_ = f.local.LowerHostLimits(ctx, k, h, ttl)
	return f.shared(func(l Learnt) error { return l.LowerHostLimits(ctx, k, h, ttl) })
}

// shared runs a write on the backend in shared mode; a failure is counted
// and dropped (the in-process memory has it).
func (f *Fleet) shared(write func(Learnt) error) error {
	l := f.learnt()
	if l == Learnt(f.local) {
		return nil
	}
	if err := write(l); err != nil {
		f.noteError(err)
		if !IsBackendError(err) {
			return err
		}
	}
	return nil
}
