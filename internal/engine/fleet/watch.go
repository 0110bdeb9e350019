package fleet

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Waking claim waiters (issue 22). A process that lost a claim waits for
// its holder's verdict. Polling for it cost the fleet 1.6x the workers'
// CPU (docs/benchmarks.md, claims), so the holder's writes wake the
// waiters instead: SetCatchAll and Unclaim publish the claim's name on one
// Redis channel per key prefix, and each process holds one subscription
// to it (claimSub) that wakes its own waiters by name. Redis connections
// and commands do not grow with waiters. A message lost (the subscription
// reconnecting) or a holder killed (its claim expires without a word)
// still needs the waiters' own slow poll: see Learnt.Watch.

// CatchAllClaim names the claim on domain's catch-all probe: SetCatchAll
// of domain wakes its waiters.
func CatchAllClaim(domain string) string { return "catchall:" + domain }

// watchers are one process's claim waiters by claim name.
type watchers struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

// add registers ch for name's wake-ups until the returned stop.
func (w *watchers) add(name string, ch chan struct{}) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]map[chan struct{}]struct{}{}
	}
	if w.m[name] == nil {
		w.m[name] = map[chan struct{}]struct{}{}
	}
	w.m[name][ch] = struct{}{}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.m[name], ch)
		if len(w.m[name]) == 0 {
			delete(w.m, name)
		}
	}
}

// wake tells name's waiters; a waiter not yet done with its last wake-up
// keeps that one (channels of one).
func (w *watchers) wake(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func newWake() chan struct{} { return make(chan struct{}, 1) }

// Watch implements Learnt for the Probers sharing this Local.
func (l *Local) Watch(name string) (<-chan struct{}, func()) {
	ch := newWake()
	return ch, l.watch.add(name, ch)
}

// claimSub is a process's one subscription to its prefix's claim channel.
type claimSub struct {
	rdb     *redis.Client
	channel string
	watchers

	mu       sync.Mutex
	ps       *redis.PubSub
	failedAt time.Time
	clk      clock.Clock
	closed   bool
}

// subRetry spaces attempts to subscribe while Redis does not answer.
const subRetry = time.Second

// start subscribes once, and waits for Redis to confirm it, so that a
// waiter that re-reads the verdict after Watch misses no message sent
// after that read. Later outages are go-redis's: it reconnects and
// subscribes again (messages in between are lost: the waiters' poll).
func (s *claimSub) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != nil || s.closed || s.clk.Since(s.failedAt) < subRetry {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ps := s.rdb.Subscribe(ctx, s.channel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		s.failedAt = s.clk.Now()
		return
	}
	s.ps = ps
	msgs := ps.Channel(redis.WithChannelSize(1024))
	go func() {
		for m := range msgs {
			s.wake(m.Payload)
		}
	}()
}

func (s *claimSub) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.ps != nil {
		_ = s.ps.Close()
	}
}

// claimChannel carries the names of claims whose holder wrote a verdict or
// gave the claim up.
func (r *Redis) claimChannel() string { return r.prefix + "claims" }

// Watch implements Learnt: one subscription for the process, started by
// the first waiter.
func (r *Redis) Watch(name string) (<-chan struct{}, func()) {
	ch := newWake()
	return ch, r.watchInto(name, ch)
}

func (r *Redis) watchInto(name string, ch chan struct{}) (stop func()) {
	stop = r.sub.add(name, ch)
	r.sub.start()
	return stop
}

// Watch implements Learnt: the process's own wake-ups always (claims taken
// in the fallback), the backend's in shared mode.
func (f *Fleet) Watch(name string) (<-chan struct{}, func()) {
	ch := newWake()
	stopLocal := f.local.watch.add(name, ch)
	if f.learnt() == Learnt(f.local) {
		return ch, stopLocal
	}
	stopShared := f.b.watchInto(name, ch)
	return ch, func() { stopLocal(); stopShared() }
}
