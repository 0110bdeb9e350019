package smtpprobe

import (
	"fmt"
	"time"
)

// Why a list is slow (issue 34, item 7): per host, the least time its own
// limits allow for the work it was given (its floor) beside the time it
// took (HostReport.Span). The floor is the largest of:
//
//   - greylisting: a host that deferred an address cannot finish before
//     Config.GreylistRetry has passed;
//   - connection rate: its sessions past the rate bucket's burst, at the
//     host's connection rate (learnt, or Config.RatePerHost);
//   - connections a window: a host counting connections in windows
//     (HostState.ConnsPerWindow) takes one window per that many sessions;
//   - concurrency: the time its sessions were open, summed, shared by the
//     sessions it allows at once; that time holds its error sleeps and
//     slow replies (a bad-recipient throttle, reputation delays).
//
// A host whose span is near its floor is paced by that limit; one far
// above it was held back by something else (this process's own session
// budget, a fleet slot, the list arriving late).

// PaceReason names the limit that sets a host's floor.
type PaceReason string

// Pace reasons.
const (
	PaceNone        PaceReason = ""
	PaceGreylisting PaceReason = "greylisting"
	PaceConnRate    PaceReason = "connection rate"
	PaceConnWindow  PaceReason = "connections a window"
	PaceConcurrency PaceReason = "concurrency (session time, error sleeps, reply delays)"
)

// floorLocked is q's floor and the limit that sets it.
func (p *Prober) floorLocked(q *hostQ) (time.Duration, PaceReason) {
	floor, why := time.Duration(0), PaceNone
	take := func(d time.Duration, r PaceReason) {
		if d > floor {
			floor, why = d, r
		}
	}
	if q.nDeferred > 0 {
		take(p.cfg.GreylistRetry, PaceGreylisting)
	}
	if extra := q.nSessions - p.burst(q); extra > 0 {
		take(time.Duration(float64(extra)/p.connRate(q)*float64(time.Second)), PaceConnRate)
	}
	if w := q.hs.ConnsPerWindow; w > 0 && q.nSessions > w {
		take(time.Duration((q.nSessions-1)/w)*p.cfg.RefusalWindow, PaceConnWindow)
	}
	if c := p.maxConns(q) * p.routes(); c > 0 {
		take(q.busy/time.Duration(c), PaceConcurrency)
	}
	return floor, why
}

func (p *Prober) reportLocked(addr string, q *hostQ) HostReport {
	floor, why := p.floorLocked(q)
	return HostReport{Addr: addr, Sessions: q.nSessions, RCPT: q.nRcpts, Span: q.last.Sub(q.first), Floor: floor, Why: why}
}

// Pace says in one line what a host's time went to: its span against
// its floor and the limit that sets it.
func (h HostReport) Pace() string {
	if h.Why == PaceNone {
		return fmt.Sprintf("%s: %.1f s, no limit met (floor 0)", h.Addr, h.Span.Seconds())
	}
	return fmt.Sprintf("%s: %.1f s, floor %.1f s set by %s (%.2fx)", h.Addr, h.Span.Seconds(), h.Floor.Seconds(), h.Why,
		h.Span.Seconds()/max(h.Floor.Seconds(), 1e-3))
}

// PacingHost is the host with the longest span (the one that paces the
// prober's work) with its floor; false before any session.
func (p *Prober) PacingHost() (HostReport, bool) {
	h := p.BusiestHosts(1)
	if len(h) == 0 {
		return HostReport{}, false
	}
	return h[0], true
}

// paceSums adds up the floors and spans of every host with sessions.
func (p *Prober) paceSums() (floor, span time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	floor, span = p.sweptFloor, p.sweptSpan
	for _, q := range p.hosts {
		floor, span = p.paceSumsLocked(q, floor, span)
	}
	return floor, span
}

func (p *Prober) paceSumsLocked(q *hostQ, floor, span time.Duration) (time.Duration, time.Duration) {
	if q.nSessions == 0 {
		return floor, span
	}
	f, _ := p.floorLocked(q)
	return floor + f, span + q.last.Sub(q.first)
}
