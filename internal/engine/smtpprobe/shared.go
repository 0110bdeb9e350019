package smtpprobe

import (
	"context"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// The seam with internal/engine/fleet (issue 22): per-host connection slots and
// rates come from Config.Limiter (in-process by default, a Redis-backed
// fleet.Fleet with --fleet-url), and the lessons sessions learn (catch-all
// verdicts, stalled or refusing hosts, learnt per-host limits) are shared
// through Config.Learnt. The scheduler lock (Prober.mu) is never held
// across a call to either: reads the scheduler needs under its lock come
// from the Prober's own caches, which shared reads outside the lock fill
// and shared writes (in the background) copy out.

// sharedTimeout bounds one call to the shared state: a backend slower than
// that is treated as saying nothing (fleet.Fleet falls back on its own).
const sharedTimeout = time.Second

// limitsLocked is what q may take of the fleet's limits: the configured
// ones lowered by what was learnt. (A host that counts connections in
// windows takes its window's connections from the fleet as tickets:
// tickets.go.)
func (p *Prober) limitsLocked(q *hostQ) fleet.Limits {
	return fleet.Limits{Conns: p.connsNowLocked(q), Rate: p.connRate(q), Burst: p.burst(q)}
}

// background runs a write to the shared state without holding anyone up;
// its failure only means the lesson stays in this process.
func background(write func(ctx context.Context) error) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		_ = write(ctx)
	}()
}

// sharedCatchAll looks domain's catch-all verdict up in the shared state.
func (p *Prober) sharedCatchAll(ctx context.Context, domain string) (catchAll, ok bool) {
	if p.cfg.Learnt == nil || domain == "" {
		return false, false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
	defer cancel()
	v, ok, err := p.cfg.Learnt.CatchAll(ctx, domain)
	if err != nil || !ok {
		return false, false
	}
	p.cache.put(domain, v)
	return v, true
}

// shareCatchAll tells the fleet a verdict this Prober found.
func (p *Prober) shareCatchAll(domain string, catchAll bool) {
	if l := p.cfg.Learnt; l != nil {
		ttl := p.cfg.CatchAllCacheTTL
		background(func(ctx context.Context) error { return l.SetCatchAll(ctx, domain, catchAll, ttl) })
	}
}

// settleSharedCatchAll settles the catch-all probes among items whose
// verdict another process found meanwhile (a list's probe waits behind its
// host's queue, so several processes sharing a domain would each send
// one), and returns the items left to send.
func (p *Prober) settleSharedCatchAll(items []*item) []*item {
	if p.cfg.Learnt == nil {
		return items
	}
	var found map[*item]bool
	for _, it := range items {
		if it.idx < 0 && !it.sub {
			if v, ok := p.sharedCatchAll(context.Background(), it.job.domain); ok {
				if found == nil {
					found = map[*item]bool{}
				}
				found[it] = v
			}
		}
	}
	if found == nil {
		return items
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := items[:0]
	for _, it := range items {
		v, ok := found[it]
		if !ok {
			out = append(out, it)
			continue
		}
		p.takeSharedVerdictLocked(it, v)
	}
	return out
}

// takeSharedVerdictLocked ends the catch-all probe it with the verdict
// another process found; the jobs waiting for it in this one get it too.
func (p *Prober) takeSharedVerdictLocked(it *item, catchAll bool) {
	if it.done {
		return
	}
	j := it.job
	j.ca = caNo
	if catchAll {
		j.ca = caYes
	}
	p.st.caCached.Add(1)
	j.finalLocked(it, Result{})
}

// sharedHostMemory is the HostMemory of a Prober with Config.Learnt: a
// local copy the scheduler reads under its lock, refreshed from the fleet
// in the background (at most every hostRefresh per host) and sending each
// lesson on.
type sharedHostMemory struct {
	local  HostMemory
	learnt fleet.Learnt
	egress string
	ttl    time.Duration

	clk     clock.Clock
	mu      sync.Mutex
	fetched map[string]time.Time
	// first holds a host's first fetch while it runs (closed when its
	// answer is in local): see awaitFirst.
	first map[string]chan struct{}
}

// hostRefresh is how often a host's learnt limits are read from the fleet
// while its sessions run.
const hostRefresh = 2 * time.Second

func newSharedHostMemory(local HostMemory, l fleet.Learnt, egress string, ttl time.Duration, clk clock.Clock) *sharedHostMemory {
	return &sharedHostMemory{local: local, learnt: l, egress: egress, ttl: ttl, clk: clock.Or(clk), fetched: map[string]time.Time{},
		first: map[string]chan struct{}{}}
}

func (h *sharedHostMemory) Load(addr string) HostState {
	s := h.local.Load(addr)
	now := h.clk.Now()
	h.mu.Lock()
	last, seen := h.fetched[addr]
	due := now.Sub(last) >= hostRefresh
	var done chan struct{}
	if due && !seen {
		done = make(chan struct{})
		h.first[addr] = done
	}
	if due {
		if len(h.fetched) >= 10_000 {
			for a, t := range h.fetched {
				if now.Sub(t) >= hostRefresh {
					delete(h.fetched, a)
				}
			}
		}
		h.fetched[addr] = now
	}
	h.mu.Unlock()
	if due {
		k := fleet.Key{Egress: h.egress, Host: addr}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
			defer cancel()
			if l, err := h.learnt.HostLimits(ctx, k); err == nil && l != (fleet.HostLimits{}) {
				h.local.Learn(addr, fromFleet(l))
			}
			if done != nil {
				h.mu.Lock()
				delete(h.first, addr)
				h.mu.Unlock()
				close(done)
			}
		}()
	}
	return s
}

// awaitFirst waits, within sharedTimeout, for the first fetch of addr's
// learnt limits when it is still running: a new process's first sessions
// to a host would otherwise run as if nothing were known of it. Traced
// in world (P) on a loaded machine: the limits another run had learnt
// (anvil's 12 connections a minute) came a second after this process's
// first sessions to the host had started; the window count then taken
// missed the connection still being dialled, the host refused the
// thirteenth, which taught a limit of 2 sessions at once and held the
// rest for a window (130 s against 73-83 s).
func (h *sharedHostMemory) awaitFirst(addr string) {
	h.mu.Lock()
	done := h.first[addr]
	h.mu.Unlock()
	if done == nil {
		return
	}
	t := h.clk.NewTimer(sharedTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C():
	}
}

func (h *sharedHostMemory) Learn(addr string, s HostState) HostState {
	out := h.local.Learn(addr, s)
	if l := toFleet(s); l != (fleet.HostLimits{}) {
		k, ttl := fleet.Key{Egress: h.egress, Host: addr}, h.ttl
		background(func(ctx context.Context) error { return h.learnt.LowerHostLimits(ctx, k, l, ttl) })
	}
	return out
}

func toFleet(s HostState) fleet.HostLimits {
	l := fleet.HostLimits{
		RcptPerTransaction: s.RcptsPerTransaction, RcptPerSession: s.RcptsPerSession,
		RejectsPerSession: s.RejectsPerSession, NonmailPerSession: s.NonmailPerSession,
		Conns: s.Conns, ConnsPerWindow: s.ConnsPerWindow, Answered: s.Answered, RejectsPerTransaction: s.RejectsPerTransaction,
		ReputationAfter: s.ReputationAfter, ReputationDelay: s.ReputationDelay,
	}
	if s.ConnRate > 0 {
		l.ConnInterval = time.Duration(float64(time.Second) / s.ConnRate)
	}
	return l
}

func fromFleet(l fleet.HostLimits) HostState {
	s := HostState{
		RcptsPerTransaction: l.RcptPerTransaction, RcptsPerSession: l.RcptPerSession,
		RejectsPerSession: l.RejectsPerSession, NonmailPerSession: l.NonmailPerSession,
		Conns: l.Conns, ConnsPerWindow: l.ConnsPerWindow, Answered: l.Answered, RejectsPerTransaction: l.RejectsPerTransaction,
		ReputationAfter: l.ReputationAfter, ReputationDelay: l.ReputationDelay,
	}
	if l.ConnInterval > 0 {
		s.ConnRate = float64(time.Second) / float64(l.ConnInterval)
	}
	return s
}
