package fleet

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Memory is an in-process fleet backend: what Redis keeps (slots, rates,
// learnt state, the epoch, the resume time and the stale set) in one
// process's memory, for tests that run several Fleets in simulated time
// (testing/synctest), and that make it unreachable (SetDown) or restart
// it without its data (Restart). Its TTLs run on its Clock, as Redis's run
// on the server's. Open a Fleet on it with OpenMemory.
type Memory struct {
	clk clock.Clock

	mu       sync.Mutex
	down     bool
	local    *Local
	epoch    string
	epochs   int
	resumeAt time.Time
	stale    map[string]time.Time // process id: its last mark
	staleEnd time.Time            // the set expires then
	clients  map[*memClient]struct{}
}

// NewMemory returns an empty, reachable Memory timed on clk (nil: the
// wall clock).
func NewMemory(clk clock.Clock) *Memory {
	clk = clock.Or(clk)
	return &Memory{clk: clk, local: NewLocal(0, clk), stale: map[string]time.Time{}, clients: map[*memClient]struct{}{}}
}

// errMemoryDown is what every call returns while the Memory is down.
var errMemoryDown = errors.New("fleet memory backend is down")

// SetDown makes the backend unreachable (true) or reachable again.
func (m *Memory) SetDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

// Restart empties the backend, as a Redis restart without persistence
// does: slots, learnt state, epoch, resume time and stale set are gone;
// the leases its clients held are forgotten (their holders find out from
// the epoch, as with Redis).
func (m *Memory) Restart() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.local = NewLocal(0, m.clk)
	m.epoch, m.resumeAt, m.stale, m.staleEnd = "", time.Time{}, map[string]time.Time{}, time.Time{}
}

// OpenMemory returns a Fleet on m: one process of the fleet, with its own
// id in the stale set.
func OpenMemory(ctx context.Context, m *Memory, o Options) *Fleet {
	o.defaults()
	c := &memClient{m: m, id: newID(), ttl: o.LeaseTTL, st: &counters{}, leases: map[*Lease]struct{}{}}
	m.mu.Lock()
	m.clients[c] = struct{}{}
	m.mu.Unlock()
	return newFleet(ctx, nil, c, o)
}

// memClient is one process's client of a Memory.
type memClient struct {
	m   *Memory
	id  string
	ttl time.Duration
	st  *counters

	mu     sync.Mutex
	leases map[*Lease]struct{}
}

// up returns the backend's current Local, or a BackendError while down.
func (c *memClient) up() (*Local, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if c.m.down {
		c.st.backendErrors.Add(1)
		return nil, &BackendError{errMemoryDown}
	}
	return c.m.local, nil
}

func (c *memClient) Acquire(ctx context.Context, k Key, lim Limits) (*Lease, error) {
	local, err := c.up()
	if err != nil {
		return nil, err
	}
	inner, err := local.Acquire(ctx, k, lim)
	if err != nil {
		return nil, err
	}
	l := newLease(time.Time{}, nil)
	l.release = func() {
		c.mu.Lock()
		delete(c.leases, l)
		c.mu.Unlock()
		inner.Release()
	}
	c.mu.Lock()
	c.leases[l] = struct{}{}
	c.mu.Unlock()
	return l, nil
}

func (c *memClient) Wait(ctx context.Context, k Key, lim Limits) error {
	local, err := c.up()
	if err != nil {
		return err
	}
	return local.Wait(ctx, k, lim)
}

func (c *memClient) loseAll() {
	c.mu.Lock()
	all := c.leases
	c.leases = map[*Lease]struct{}{}
	c.mu.Unlock()
	for l := range all {
		c.st.leasesLost.Add(1)
		l.markLost()
	}
}

func (c *memClient) check(_ context.Context, settle time.Duration) (health, error) {
	if _, err := c.up(); err != nil {
		return health{}, err
	}
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	if m.epoch == "" {
		m.epochs++
		m.epoch = newID()
		if !m.resumeAt.After(now) {
			m.resumeAt = now.Add(settle)
		}
	}
	if !now.Before(m.staleEnd) {
		m.stale = map[string]time.Time{}
	}
	h := health{epoch: m.epoch}
	if m.resumeAt.After(now) {
		h.resumeAt = m.resumeAt
	}
	for _, at := range m.stale {
		h.lastStale = maxTime(h.lastStale, at)
		if at.After(now.Add(-c.ttl)) {
			h.stale++
		}
	}
	return h, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (c *memClient) setResume(_ context.Context, settle time.Duration) error {
	if _, err := c.up(); err != nil {
		return err
	}
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := m.clk.Now(); !m.resumeAt.After(now) {
		m.resumeAt = now.Add(settle)
	}
	return nil
}

func (c *memClient) markStale(_ context.Context, keep time.Duration) error {
	if _, err := c.up(); err != nil {
		return err
	}
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	m.stale[c.id] = now
	m.staleEnd = now.Add(keep)
	return nil
}

func (c *memClient) leaveStale(context.Context) error {
	if _, err := c.up(); err != nil {
		return err
	}
	c.m.mu.Lock()
	delete(c.m.stale, c.id)
	c.m.mu.Unlock()
	return nil
}

func (c *memClient) learnt() (*Local, error) { return c.up() }

func (c *memClient) CatchAll(ctx context.Context, domain string) (bool, bool, error) {
	l, err := c.learnt()
	if err != nil {
		return false, false, err
	}
	return l.CatchAll(ctx, domain)
}

func (c *memClient) SetCatchAll(ctx context.Context, domain string, catchAll bool, ttl time.Duration) error {
	l, err := c.learnt()
	if err != nil {
		return err
	}
	return l.SetCatchAll(ctx, domain, catchAll, ttl)
}

func (c *memClient) Penalty(ctx context.Context, k Key) (Penalty, bool, error) {
	l, err := c.learnt()
	if err != nil {
		return Penalty{}, false, err
	}
	return l.Penalty(ctx, k)
}

func (c *memClient) SetPenalty(ctx context.Context, k Key, p Penalty, ttl time.Duration) error {
	l, err := c.learnt()
	if err != nil {
		return err
	}
	return l.SetPenalty(ctx, k, p, ttl)
}

func (c *memClient) ClearPenalty(ctx context.Context, k Key) error {
	l, err := c.learnt()
	if err != nil {
		return err
	}
	return l.ClearPenalty(ctx, k)
}

func (c *memClient) HostLimits(ctx context.Context, k Key) (HostLimits, error) {
	l, err := c.learnt()
	if err != nil {
		return HostLimits{}, err
	}
	return l.HostLimits(ctx, k)
}

func (c *memClient) LowerHostLimits(ctx context.Context, k Key, h HostLimits, ttl time.Duration) error {
	l, err := c.learnt()
	if err != nil {
		return err
	}
	return l.LowerHostLimits(ctx, k, h, ttl)
}

func (c *memClient) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	l, err := c.learnt()
	if err != nil {
		return false, err
	}
	return l.Claim(ctx, name, holder, ttl)
}

func (c *memClient) Unclaim(ctx context.Context, name, holder string) error {
	l, err := c.learnt()
	if err != nil {
		return err
	}
	return l.Unclaim(ctx, name, holder)
}

// Watch implements Learnt. A Restart does not wake the waiters of the
// old state (nor does Redis's): they poll.
func (c *memClient) Watch(name string) (<-chan struct{}, func()) {
	ch := newWake()
	return ch, c.watchInto(name, ch)
}

func (c *memClient) watchInto(name string, ch chan struct{}) func() {
	c.m.mu.Lock()
	l := c.m.local
	c.m.mu.Unlock()
	return l.watch.add(name, ch)
}

func (c *memClient) counters() *counters { return c.st }

func (c *memClient) Close() error {
	c.m.mu.Lock()
	delete(c.m.clients, c)
	c.m.mu.Unlock()
	return nil
}
