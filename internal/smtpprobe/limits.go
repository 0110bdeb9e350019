package smtpprobe

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// hostLimits holds, per MX host address, a semaphore bounding concurrent
// connections and a token bucket bounding new connections per second.
// Entries are created on demand and swept when idle with a full bucket, so
// forgetting one never grants a fresh burst early.
type hostLimits struct {
	conns int
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	m       map[string]*hostLimit
	sweepAt int
}

type hostLimit struct {
	sem  chan struct{}
	lim  *rate.Limiter
	refs int // acquirers holding or waiting (guarded by hostLimits.mu)
}

const minSweep = 4096

func newHostLimits(conns int, perSec float64) *hostLimits {
	return &hostLimits{
		conns:   conns,
		rate:    rate.Limit(perSec),
		burst:   conns,
		m:       make(map[string]*hostLimit),
		sweepAt: minSweep,
	}
}

// acquire waits for a connection slot and then a rate token for addr. The
// release function frees the slot. It fails with ctx's error, or a rate
// error when the token cannot come before ctx's deadline.
func (l *hostLimits) acquire(ctx context.Context, addr string) (release func(), err error) {
	l.mu.Lock()
	h := l.m[addr]
	if h == nil {
		if len(l.m) >= l.sweepAt {
			l.sweepLocked()
		}
		h = &hostLimit{sem: make(chan struct{}, l.conns), lim: rate.NewLimiter(l.rate, l.burst)}
		l.m[addr] = h
	}
	h.refs++
	l.mu.Unlock()

	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		l.unref(h)
		return nil, ctx.Err()
	}
	// Wait for the token while holding the slot: the connection is opened
	// right after, so the rate bounds actual connection starts.
	if err := h.lim.Wait(ctx); err != nil {
		<-h.sem
		l.unref(h)
		if ctx.Err() == nil { // the token would come after the deadline
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-h.sem
			l.unref(h)
		})
	}, nil
}

func (l *hostLimits) unref(h *hostLimit) {
	l.mu.Lock()
	h.refs--
	l.mu.Unlock()
}

// sweepLocked forgets idle hosts whose bucket is full again.
func (l *hostLimits) sweepLocked() {
	now := time.Now()
	for k, h := range l.m {
		if h.refs == 0 && h.lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.m))
}

func (l *hostLimits) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// verdictCache is a bounded LRU of per-domain catch-all verdicts with a TTL.
type verdictCache struct {
	size int
	ttl  time.Duration
	now  func() time.Time

	mu  sync.Mutex
	m   map[string]*list.Element
	lru list.List // front = most recent; values *verdictEntry
}

type verdictEntry struct {
	domain   string
	catchAll bool
	expires  time.Time
}

func newVerdictCache(size int, ttl time.Duration) *verdictCache {
	return &verdictCache{size: size, ttl: ttl, now: time.Now, m: make(map[string]*list.Element)}
}

func (c *verdictCache) get(domain string) (catchAll, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[domain]
	if e == nil {
		return false, false
	}
	v := e.Value.(*verdictEntry)
	if !c.now().Before(v.expires) {
		c.lru.Remove(e)
		delete(c.m, domain)
		return false, false
	}
	c.lru.MoveToFront(e)
	return v.catchAll, true
}

func (c *verdictCache) put(domain string, catchAll bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp := c.now().Add(c.ttl)
	if e := c.m[domain]; e != nil {
		v := e.Value.(*verdictEntry)
		v.catchAll, v.expires = catchAll, exp
		c.lru.MoveToFront(e)
		return
	}
	for c.lru.Len() >= c.size {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.m, old.Value.(*verdictEntry).domain)
	}
	c.m[domain] = c.lru.PushFront(&verdictEntry{domain: domain, catchAll: catchAll, expires: exp})
}

func (c *verdictCache) del(domain string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[domain]; e != nil {
		c.lru.Remove(e)
		delete(c.m, domain)
	}
}

func (c *verdictCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
