package fleet

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Local is the in-process Limiter and Learnt: one process's limits and
// memory, as without --fleet-url. It is safe for concurrent use.
type Local struct {
	now  func() time.Time
	size int

	mu     sync.Mutex
	slots  map[Key]*semaphore
	limits map[Key]*rate.Limiter
	sweep  int
	claims map[string]localClaim
	watch  watchers

	state localState
}

type semaphore struct {
	held    int
	waiters []chan struct{}
}

// NewLocal returns an in-process limiter and state holding at most size
// learnt entries (default 100,000), timed on clk (nil: the wall clock).
func NewLocal(size int, clk clock.Clock) *Local {
	if size <= 0 {
		size = 100_000
	}
	clk = clock.Or(clk)
	l := &Local{now: clk.Now, size: size, slots: map[Key]*semaphore{}, limits: map[Key]*rate.Limiter{}, sweep: 4096}
	l.state.init(size, l.now)
	return l
}

var _ Limiter = (*Local)(nil)
var _ Learnt = (*Local)(nil)

// Acquire implements Limiter.
func (l *Local) Acquire(ctx context.Context, k Key, lim Limits) (*Lease, error) {
	lim = lim.norm()
	for {
		l.mu.Lock()
		s := l.slots[k]
		if s == nil {
			s = &semaphore{}
			l.slots[k] = s
		}
		if s.held < lim.Conns {
			s.held++
			l.mu.Unlock()
			return newLease(time.Time{}, func() { l.release(k) }), nil
		}
		ch := make(chan struct{})
		s.waiters = append(s.waiters, ch)
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			l.dropWaiter(k, ch)
			return nil, ctx.Err()
		}
	}
}

func (l *Local) release(k Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.slots[k]
	if s == nil {
		return
	}
	s.held--
	l.wakeLocked(k, s)
}

// wakeLocked wakes every waiter of k: each tries again (limits may differ
// per call, so the first in line is not necessarily the one that fits).
func (l *Local) wakeLocked(k Key, s *semaphore) {
	for _, w := range s.waiters {
		close(w)
	}
	s.waiters = nil
	if s.held <= 0 {
		delete(l.slots, k)
	}
}

func (l *Local) dropWaiter(k Key, ch chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.slots[k]
	if s == nil {
		return
	}
	for i, w := range s.waiters {
		if w == ch {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-ch: // woken meanwhile: pass the wake-up on
		l.wakeLocked(k, s)
	default:
	}
}

// Wait implements Limiter.
func (l *Local) Wait(ctx context.Context, k Key, lim Limits) error {
	lim = lim.norm()
	l.mu.Lock()
	r := l.limits[k]
	if r == nil {
		if len(l.limits) >= l.sweep {
			l.sweepLocked()
		}
		r = rate.NewLimiter(rate.Limit(lim.Rate), lim.Burst)
		l.limits[k] = r
	} else if r.Limit() != rate.Limit(lim.Rate) || r.Burst() != lim.Burst {
		r.SetLimit(rate.Limit(lim.Rate))
		r.SetBurst(lim.Burst)
	}
	l.mu.Unlock()
	return r.Wait(ctx)
}

// sweepLocked forgets rate buckets that are full again: forgetting one
// never grants a burst early.
func (l *Local) sweepLocked() {
	now := l.now()
	for k, r := range l.limits {
		if r.TokensAt(now) >= float64(r.Burst()) {
			delete(l.limits, k)
		}
	}
	l.sweep = max(4096, 2*len(l.limits))
}

// CatchAll implements Learnt.
func (l *Local) CatchAll(_ context.Context, domain string) (bool, bool, error) {
	v, ok := l.state.get("ca|" + domain)
	if !ok {
		return false, false, nil
	}
	return v.(bool), true, nil
}

// SetCatchAll implements Learnt.
func (l *Local) SetCatchAll(_ context.Context, domain string, catchAll bool, ttl time.Duration) error {
	l.state.put("ca|"+domain, catchAll, ttl)
	l.watch.wake(CatchAllClaim(domain))
	return nil
}

// Penalty implements Learnt.
func (l *Local) Penalty(_ context.Context, k Key) (Penalty, bool, error) {
	v, ok := l.state.get("pen|" + k.String())
	if !ok {
		return Penalty{}, false, nil
	}
	return v.(Penalty), true, nil
}

// SetPenalty implements Learnt.
func (l *Local) SetPenalty(_ context.Context, k Key, p Penalty, ttl time.Duration) error {
	if p.At.IsZero() {
		p.At = l.now()
	}
	l.state.put("pen|"+k.String(), p, ttl)
	return nil
}

// ClearPenalty implements Learnt.
func (l *Local) ClearPenalty(_ context.Context, k Key) error {
	l.state.del("pen|" + k.String())
	return nil
}

// HostLimits implements Learnt.
func (l *Local) HostLimits(_ context.Context, k Key) (HostLimits, error) {
	v, ok := l.state.get("lim|" + k.String())
	if !ok {
		return HostLimits{}, nil
	}
	return v.(HostLimits), nil
}

// LowerHostLimits implements Learnt.
func (l *Local) LowerHostLimits(_ context.Context, k Key, h HostLimits, ttl time.Duration) error {
	key := "lim|" + k.String()
	l.state.update(key, ttl, func(old any, ok bool) any {
		if !ok {
			return HostLimits{}.merge(h)
		}
		return old.(HostLimits).merge(h)
	})
	return nil
}

// localState is a bounded map of values with expiry times.
type localState struct {
	mu   sync.Mutex
	size int
	now  func() time.Time
	m    map[string]stateEntry
}

type stateEntry struct {
	v       any
	expires time.Time
}

func (s *localState) init(size int, now func() time.Time) {
	s.size, s.now, s.m = size, now, map[string]stateEntry{}
}

func (s *localState) get(k string) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok {
		return nil, false
	}
	if !s.now().Before(e.expires) {
		delete(s.m, k)
		return nil, false
	}
	return e.v, true
}

func (s *localState) put(k string, v any, ttl time.Duration) {
	s.update(k, ttl, func(any, bool) any { return v })
}

func (s *localState) update(k string, ttl time.Duration, f func(old any, ok bool) any) {
	if ttl <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	old, ok := s.m[k]
	if ok && !now.Before(old.expires) {
		ok = false
	}
	if !ok && len(s.m) >= s.size {
		s.evictLocked(now)
	}
	s.m[k] = stateEntry{v: f(old.v, ok), expires: now.Add(ttl)}
}

// evictLocked drops expired entries, then the soonest to expire until a
// tenth of the room is free.
func (s *localState) evictLocked(now time.Time) {
	for k, e := range s.m {
		if !now.Before(e.expires) {
			delete(s.m, k)
		}
	}
	excess := len(s.m) - (s.size - s.size/10)
	if excess <= 0 {
		return
	}
	type kv struct {
		k string
		t time.Time
	}
	all := make([]kv, 0, len(s.m))
	for k, e := range s.m {
		all = append(all, kv{k, e.expires})
	}
	slices.SortFunc(all, func(a, b kv) int { return a.t.Compare(b.t) })
	for _, e := range all[:excess] {
		delete(s.m, e.k)
	}
}

func (s *localState) del(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}
