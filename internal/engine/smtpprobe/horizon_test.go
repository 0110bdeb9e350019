package smtpprobe

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// TestHorizon: how long a host's work may take at no cost to the
// process's is half the time until the last greylisting deferral at
// another host comes due, while that host has addresses waiting out its
// greylisting: one of them settled early does not end it.
func TestHorizon(t *testing.T) {
	type deferral struct {
		host   string        // "q" is the host asked about
		after  time.Duration // from the start
		settle bool          // then settled at once (its job ended)
	}
	for _, tc := range []struct {
		name      string
		deferrals []deferral
		qGreys    bool          // q has deferred addresses of its own
		retried   []string      // hosts whose waiting addresses all went back to their queue
		at        time.Duration // asked this long after the start
		want      time.Duration
	}{
		{name: "none deferred", want: 0},
		{name: "another host's", deferrals: []deferral{{"b", 0, false}}, want: 30 * time.Second},
		{name: "later, less", deferrals: []deferral{{"b", 0, false}}, at: 40 * time.Second, want: 10 * time.Second},
		{name: "q's own do not count", deferrals: []deferral{{"b", 0, false}, {"q", 2 * time.Second, false}}, at: 2 * time.Second, want: 29 * time.Second},
		{name: "only q's own", deferrals: []deferral{{"q", 0, false}}, want: 0},
		{name: "the latest, at another host", deferrals: []deferral{{"b", 0, false}, {"c", 4 * time.Second, false}}, at: 4 * time.Second, want: 30 * time.Second},
		{name: "the last one settled, its host's others wait",
			deferrals: []deferral{{"b", 0, false}, {"b", time.Second, true}}, at: time.Second, want: 30 * time.Second},
		{name: "the last one settled alone", deferrals: []deferral{{"b", 0, true}}, want: 0},
		{name: "its host's all retried", deferrals: []deferral{{"b", 0, false}}, retried: []string{"b"}, want: 0},
		{name: "q greylists: less the delay", deferrals: []deferral{{"b", 0, false}, {"c", 50 * time.Second, false}}, qGreys: true, at: 50 * time.Second, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Config{GreylistRetry: time.Minute})
				p.mu.Lock()
				defer p.mu.Unlock()
				start := p.clk.Now()
				q := p.host("q")
				if tc.qGreys {
					q.nDeferred = 1
				}
				for _, d := range tc.deferrals {
					if wait := start.Add(d.after).Sub(p.clk.Now()); wait > 0 {
						p.mu.Unlock()
						simtime.Advance(wait)
						p.mu.Lock()
					}
					h := p.host(d.host)
					it := &item{due: p.clk.Now().Add(p.cfg.GreylistRetry), greyQ: h, heapIx: -1}
					h.greyWaiting++
					p.noteGreyLocked(it)
					if d.settle {
						p.ungreyLocked(it)
					}
				}
				for _, h := range tc.retried {
					p.host(h).greyWaiting = 0
				}
				if wait := start.Add(tc.at).Sub(p.clk.Now()); wait > 0 {
					p.mu.Unlock()
					simtime.Advance(wait)
					p.mu.Lock()
				}
				if got := p.horizonLocked(q); got != tc.want {
					t.Fatalf("horizon %v, want %v", got, tc.want)
				}
			})
		})
	}
}
