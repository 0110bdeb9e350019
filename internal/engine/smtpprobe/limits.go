package smtpprobe

import (
	"container/list"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

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

func newVerdictCache(size int, ttl time.Duration, clk clock.Clock) *verdictCache {
	return &verdictCache{size: size, ttl: ttl, now: clock.Or(clk).Now, m: make(map[string]*list.Element)}
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
