package smtpprobe

import (
	"container/list"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// hostPenalties remembers, per MX host address (ip:port), a recent failure
// that makes another attempt pointless for a while: a connect that timed
// out or was refused (or found no route), or a greeting that never came
// within CommandTimeout. It is a bounded LRU with a TTL, shared by all calls
// of a Prober, so that a tarpit costs one CommandTimeout per TTL instead of
// one per batch.
type hostPenalties struct {
	size int
	ttl  time.Duration
	now  func() time.Time

	mu  sync.Mutex
	m   map[string]*list.Element
	lru list.List // front = most recently marked; values *penaltyEntry
}

type penaltyEntry struct {
	addr    string
	err     error // the failure behind the penalty
	at      time.Time
	expires time.Time
}

// newHostPenalties returns nil (no memory) when ttl is not positive.
func newHostPenalties(size int, ttl time.Duration) *hostPenalties {
	if ttl <= 0 {
		return nil
	}
	return &hostPenalties{size: size, ttl: ttl, now: time.Now, m: make(map[string]*list.Element)}
}

// check returns a non-nil error (wrapping ErrHostSkipped and the original
// failure) when addr is penalised.
func (h *hostPenalties) check(addr string) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[addr]
	if e == nil {
		return nil
	}
	v := e.Value.(*penaltyEntry)
	now := h.now()
	if !now.Before(v.expires) {
		h.lru.Remove(e)
		delete(h.m, addr)
		return nil
	}
	return fmt.Errorf("%w (failed %v ago, retried after %v): %w",
		ErrHostSkipped, now.Sub(v.at).Round(time.Millisecond), v.expires.Sub(now).Round(time.Millisecond), v.err)
}

// mark penalises addr for the TTL from now.
func (h *hostPenalties) mark(addr string, err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if e := h.m[addr]; e != nil {
		v := e.Value.(*penaltyEntry)
		v.err, v.at, v.expires = err, now, now.Add(h.ttl)
		h.lru.MoveToFront(e)
		return
	}
	for h.lru.Len() >= h.size {
		old := h.lru.Back()
		h.lru.Remove(old)
		delete(h.m, old.Value.(*penaltyEntry).addr)
	}
	h.m[addr] = h.lru.PushFront(&penaltyEntry{addr: addr, err: err, at: now, expires: now.Add(h.ttl)})
}

// clear forgets addr's penalty (it answered after all).
func (h *hostPenalties) clear(addr string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[addr]; e != nil {
		h.lru.Remove(e)
		delete(h.m, addr)
	}
}

func (h *hostPenalties) len() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lru.Len()
}

// unreachable reports whether a connect error means the host is
// unreachable for now: timed out, refused, or no route. (Errors caused by
// the caller's context never get here.)
func unreachable(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	}
	return false
}
