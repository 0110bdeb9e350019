package smtpprobe

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"

	"github.com/emaildata/emaildata/internal/platform/clock"
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

	// shared, when set, holds the penalties of the fleet: marks and
	// clears are sent on in the background, checkShared reads it.
	shared fleet.Learnt
	egress string
}

type penaltyEntry struct {
	addr    string
	err     error // the failure behind the penalty
	at      time.Time
	expires time.Time
}

// newHostPenalties returns nil (no memory) when ttl is not positive.
func newHostPenalties(size int, ttl time.Duration, shared fleet.Learnt, egress string, clk clock.Clock) *hostPenalties {
	if ttl <= 0 {
		return nil
	}
	return &hostPenalties{size: size, ttl: ttl, now: clock.Or(clk).Now, m: make(map[string]*list.Element), shared: shared, egress: egress}
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

// checkShared is check, then (with nothing known here) the fleet's
// penalty of addr, which is remembered here until it expires. It makes a
// round trip to the fleet: call it without the scheduler lock.
func (h *hostPenalties) checkShared(addr string) error {
	if err := h.check(addr); err != nil || h == nil || h.shared == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	pen, ok, err := h.shared.Penalty(ctx, fleet.Key{Egress: h.egress, Host: addr})
	if err != nil || !ok {
		return nil
	}
	h.markLocal(addr, fromReason(pen.Reason), pen.At)
	return h.check(addr)
}

// silentTag starts the shared reason of a penalty for a host that never
// answered, so that other processes settle its addresses Timeout too.
const silentTag = "silent: "

func toReason(err error) string {
	if silentErr(err) {
		return silentTag + err.Error()
	}
	return err.Error()
}

func fromReason(r string) error {
	if rest, ok := strings.CutPrefix(r, silentTag); ok {
		return fmt.Errorf("%w (%s, found by another process of the fleet)", errNoAnswer, rest)
	}
	return fmt.Errorf("%s (found by another process of the fleet)", r)
}

// mark penalises addr for the TTL from now, in the fleet too.
func (h *hostPenalties) mark(addr string, err error) {
	if h == nil {
		return
	}
	now := h.now()
	h.markLocal(addr, err, now)
	if l := h.shared; l != nil {
		k, p, ttl := fleet.Key{Egress: h.egress, Host: addr}, fleet.Penalty{Reason: toReason(err), At: now}, h.ttl
		background(func(ctx context.Context) error { return l.SetPenalty(ctx, k, p, ttl) })
	}
}

// markLocal penalises addr here for the TTL from at.
func (h *hostPenalties) markLocal(addr string, err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
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

// clear forgets addr's penalty (it answered after all), in the fleet too
// when one was known here.
func (h *hostPenalties) clear(addr string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	e := h.m[addr]
	if e != nil {
		h.lru.Remove(e)
		delete(h.m, addr)
	}
	h.mu.Unlock()
	if l := h.shared; l != nil && e != nil {
		k := fleet.Key{Egress: h.egress, Host: addr}
		background(func(ctx context.Context) error { return l.ClearPenalty(ctx, k) })
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
