package smtpprobe

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// A batch arriving while a host's first addresses wait out its
// greylisting gets no parallel session when the running one can send it
// before their retry: the host's sessions do not depend on how the
// process's work arrives. Without greylisting, the same backlog still
// gets its parallel session.
func TestNoParallelSessionWhileGreylisted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		greylist time.Duration
		maxConc  int
	}{
		{"greylisting", time.Second, 1},
		{"no greylisting", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				boxes := map[string]mailworld.Behaviour{}
				addr := func(i int) string { return fmt.Sprintf("u%d@frugal.test", i) }
				for i := range 400 {
					boxes[fmt.Sprintf("u%d", i)] = mailworld.Exists
				}
				// Replies take a while, so that the first batch's session
				// is still open when the second batch comes.
				e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "frugal.test", Greylist: tc.greylist,
					Latency: 2 * time.Millisecond, Mailboxes: boxes})
				p := e.prober(func(c *Config) { c.GreylistRetry = 2 * time.Second })
				var wg sync.WaitGroup
				for b, n := range []int{100, 300} {
					var addrs []string
					for i := range n {
						addrs = append(addrs, addr(b*100+i))
					}
					res := make([]Result, len(addrs))
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := p.ProbeBatch(ctxTimeout(t, time.Minute), "frugal.test", e.mx("frugal.test"), addrs, res); err != nil {
							t.Error(err)
						}
					}()
					simtime.Advance(200 * time.Millisecond) // the first batch's replies are in
				}
				// Before the first retry (at 2 s): the first passes.
				simtime.Advance(time.Second)
				if hs := hostStats(e, "mx1.frugal.test"); hs.MaxConcurrent != tc.maxConc {
					t.Errorf("%d sessions at once (%d in all) before the retries, want %d", hs.MaxConcurrent, hs.Total, tc.maxConc)
				}
				wg.Wait()
			})
		})
	}
}

// A host's backlog gets no parallel session either while another host's
// addresses wait out their greylisting and the running session sends it
// well before their retry: the process's work ends no sooner. Alone, the
// same backlog gets its parallel session. Every verdict right, and the
// host's work done long before the retry.
func TestNoParallelSessionBesideGreylisting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		grey    bool
		maxConc int
	}{
		{"alone", false, 2},
		{"beside greylisting", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const delay = time.Minute
				boxes := map[string]mailworld.Behaviour{}
				var addrs []string
				for i := range 400 {
					boxes[fmt.Sprintf("u%d", i)] = mailworld.Exists
					addrs = append(addrs, fmt.Sprintf("u%d@busy.test", i))
				}
				e := startWorld(t, mailworld.Options{},
					mailworld.Domain{Name: "busy.test", Latency: 2 * time.Millisecond, Mailboxes: boxes},
					mailworld.Domain{Name: "grey.test", Greylist: delay, Mailboxes: map[string]mailworld.Behaviour{"a": mailworld.Exists}})
				p := e.prober(func(c *Config) { c.GreylistRetry = delay })
				wg := &sync.WaitGroup{}
				if tc.grey {
					wg = greylistBeside(t, e, p)
				}
				t0 := time.Now()
				var took [2]time.Duration
				for b, part := range [][]string{addrs[:100], addrs[100:]} {
					res := make([]Result, len(part))
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := p.ProbeBatch(ctxTimeout(t, 10*time.Minute), "busy.test", e.mx("busy.test"), part, res); err != nil {
							t.Error(err)
						}
						for i, r := range res {
							if r.Outcome != Deliverable {
								t.Errorf("%s: %v (%v)", part[i], r.Outcome, r.Err)
							}
						}
						took[b] = time.Since(t0)
					}()
					simtime.Advance(200 * time.Millisecond) // the first batch's replies are in
				}
				wg.Wait()
				if hs := hostStats(e, "mx1.busy.test"); hs.MaxConcurrent != tc.maxConc || max(took[0], took[1]) >= delay/2 {
					t.Errorf("%d sessions at once (%d in all), done after %v; want %d, within %v", hs.MaxConcurrent, hs.Total, max(took[0], took[1]), tc.maxConc, delay/2)
				}
			})
		})
	}
}

// A provider's host, some of whose domains greylist: its first session's
// first replies (plain domains' addresses) do not show it, so another
// session opens only once the host has answered as many RCPTs as the
// backlog that warrants one (secondSessionBacklog). By then a greylisted
// address has shown that another session gains nothing: one session
// for the first pass, one for the retries (before, a second session
// opened with the second address queued, nothing known of the host).
// Without greylisting, the same backlog gets its parallel session once
// sampled.
func TestNoParallelSessionBeforeSample(t *testing.T) {
	for _, tc := range []struct {
		name     string
		greylist time.Duration
		total    int // sessions the host saw
		maxConc  int
	}{
		{"greylisting domain", time.Minute, 2, 1},
		{"no greylisting", 0, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const provider = "provider.test"
				plain, grey := map[string]mailworld.Behaviour{}, map[string]mailworld.Behaviour{}
				var plainAddrs, greyAddrs []string
				for i := range 400 {
					plain[fmt.Sprintf("u%d", i)] = mailworld.Exists
					plainAddrs = append(plainAddrs, fmt.Sprintf("u%d@plain.test", i))
				}
				for i := range 20 {
					grey[fmt.Sprintf("g%d", i)] = mailworld.Exists
					greyAddrs = append(greyAddrs, fmt.Sprintf("g%d@grey.test", i))
				}
				e := startWorld(t, mailworld.Options{Latency: 2 * time.Millisecond},
					mailworld.Domain{Name: "plain.test", Provider: provider, Mailboxes: plain},
					mailworld.Domain{Name: "grey.test", Provider: provider, Greylist: tc.greylist, Mailboxes: grey})
				p := e.prober(func(c *Config) { c.GreylistRetry = time.Minute })
				var wg sync.WaitGroup
				// The plain domain's first 20 addresses, the greylisting
				// domain's, then the plain domain's others: all queued at
				// once, as a list's batch comes.
				for _, b := range []struct {
					domain string
					addrs  []string
				}{{"plain.test", plainAddrs[:20]}, {"grey.test", greyAddrs}, {"plain.test", plainAddrs[20:]}} {
					res := make([]Result, len(b.addrs))
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := p.ProbeBatch(ctxTimeout(t, 10*time.Minute), b.domain, e.mx(b.domain), b.addrs, res); err != nil {
							t.Error(err)
						}
						for i, r := range res {
							if r.Outcome != Deliverable {
								t.Errorf("%s: %v (%v)", b.addrs[i], r.Outcome, r.Err)
							}
						}
					}()
					synctest.Wait() // queued in this order
				}
				wg.Wait()
				if hs := hostStats(e, "mx1."+provider); hs.Total != tc.total || hs.MaxConcurrent != tc.maxConc {
					t.Errorf("%d sessions (%d at once), want %d (%d at once)", hs.Total, hs.MaxConcurrent, tc.total, tc.maxConc)
				}
			})
		})
	}
}

// A host's greylisting retries come due as its first pass sent them:
// here in three parts, 1.5 s apart (three first-pass sessions, as a
// list's batches come). The retries span 3 s, more than greyHold, but
// each comes due within greyHold of the one before: one session sends
// them all.
func TestRetriesSpanningGreyHoldOneSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boxes := map[string]mailworld.Behaviour{}
		for i := range 30 {
			boxes[fmt.Sprintf("u%d", i)] = mailworld.Exists
		}
		e := startWorld(t, mailworld.Options{Latency: 2 * time.Millisecond},
			mailworld.Domain{Name: "grey.test", Greylist: time.Minute, Mailboxes: boxes})
		p := e.prober(func(c *Config) { c.GreylistRetry = time.Minute })
		var wg sync.WaitGroup
		for b := range 3 {
			var addrs []string
			for i := range 10 {
				addrs = append(addrs, fmt.Sprintf("u%d@grey.test", b*10+i))
			}
			res := make([]Result, len(addrs))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.ProbeBatch(ctxTimeout(t, 10*time.Minute), "grey.test", e.mx("grey.test"), addrs, res); err != nil {
					t.Error(err)
				}
				for i, r := range res {
					if r.Outcome != Deliverable {
						t.Errorf("%s: %v (%v)", addrs[i], r.Outcome, r.Err)
					}
				}
			}()
			simtime.Advance(1500 * time.Millisecond)
		}
		simtime.Advance(55 * time.Second) // to 59.5 s: the first pass only
		if hs := hostStats(e, "mx1.grey.test"); hs.Total != 3 {
			t.Fatalf("%d first-pass sessions, want 3", hs.Total)
		}
		wg.Wait()
		if hs := hostStats(e, "mx1.grey.test"); hs.Total != 4 || hs.MaxConcurrent != 1 {
			t.Errorf("%d sessions (%d at once), want 4: one for the retries", hs.Total, hs.MaxConcurrent)
		}
	})
}
