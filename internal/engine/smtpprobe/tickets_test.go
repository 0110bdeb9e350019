package smtpprobe

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// TestWindowTickets: a greylisting host that takes 4 connections a window
// (anvil), known from before, and a session limit of 5 RCPTs: the first
// pass (16 RCPTs, the catch-all probe among them) takes the first
// window's 4 sessions at once, so the retries (15) come due within it and
// go in 3 sessions of the next window, as soon as it starts (the window
// and our margin: 12 s; the last reply a few milliseconds later). With
// one process on a fleet as without one: the fleet's tickets keep
// processes together to 4 a window, and no longer space one process's
// connections a window/4 apart (3 s, which ran the retries to 20 s).
// Two processes sharing the fleet share each window: the host refuses
// none of their connections. Which process takes which of a window's
// tickets is the bubble's choice of goroutine order, and decides whether
// the last retries make the fourth window's start (34.007 s) or wait a
// session there (35.006 s): either is exact, nothing in between.
func TestWindowTickets(t *testing.T) {
	const (
		window = 10 * time.Second
		grey   = 5 * time.Second
	)
	for _, tc := range []struct {
		name     string
		fleet    bool
		procs    int
		sessions int
		took     []time.Duration
	}{
		{"no fleet", false, 1, 7, []time.Duration{12*time.Second + time.Millisecond}},
		{"one process on a fleet", true, 1, 7, []time.Duration{12*time.Second + time.Millisecond}},
		{"two processes on a fleet", true, 2, 13, []time.Duration{34*time.Second + 7*time.Millisecond, 35*time.Second + 6*time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				boxes, addrs := halfMissing("win.test", 15*tc.procs)
				e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "win.test", Mailboxes: boxes, Greylist: grey,
					ConnRateLimit: 4, ConnRateWindow: window, RcptLimit: 5})
				f := fleet.NewLocal(0, nil)
				var ps []*Prober
				for range tc.procs {
					p := e.prober(func(c *Config) {
						c.GreylistRetry, c.RefusalWindow, c.MaxRcptPerSession, c.CommandTimeout = grey, window, 5, time.Minute
						if tc.fleet {
							c.Limiter, c.Learnt = f, f
						}
					})
					p.cfg.HostMemory.Learn(e.w.MXAddrs("win.test")[0], HostState{ConnsPerWindow: 4, Answered: true})
					ps = append(ps, p)
				}
				t0 := time.Now()
				done := make(chan error, len(ps))
				for i, p := range ps {
					part := addrs[i*15 : (i+1)*15]
					go func() {
						res := make([]Result, len(part))
						err := p.ProbeBatch(ctxTimeout(t, 5*time.Minute), "win.test", e.mx("win.test"), part, res)
						for k, r := range res {
							want := Missing
							if boxes[part[k][:len(part[k])-len("@win.test")]] == mailworld.Exists {
								want = Deliverable
							}
							if err == nil && r.Outcome != want {
								err = fmt.Errorf("%s: %v (%v), want %v", part[k], r.Outcome, r.Err, want)
							}
						}
						done <- err
					}()
				}
				for range ps {
					if err := <-done; err != nil {
						t.Fatal(err)
					}
				}
				took := time.Since(t0)
				hs := hostStats(e, "mx1.win.test")
				if hs.Rejected != 0 || hs.Total != tc.sessions || !slices.Contains(tc.took, took) {
					t.Fatalf("%d sessions (%d refused) in %v; want %d, none refused, in %v", hs.Total, hs.Rejected, took, tc.sessions, tc.took)
				}
			})
		})
	}
}

// TestWindowCountsEarlierConnections: a window limit learnt after
// connections of ours in the host's window (from the fleet, while this
// process's first sessions ran) counts them: the window started with the
// first of them, and has that many fewer connections left. Connections
// older than the host's window do not count, nor those before a refusal
// that taught the limit (its backoff waited their window out).
func TestWindowCountsEarlierConnections(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ago      []time.Duration // our accepted connections, this long ago
		ok       bool
		count    int
		startAgo time.Duration
	}{
		{"none before", nil, true, 1, 0},
		{"two before", []time.Duration{5 * time.Second, 3 * time.Second}, true, 3, 5 * time.Second},
		{"one older than the window", []time.Duration{61 * time.Second, 3 * time.Second}, true, 2, 3 * time.Second},
		{"the window full", []time.Duration{4 * time.Second, 3 * time.Second, 2 * time.Second, time.Second}, false, 4, 4 * time.Second},
		{"before a refusal that taught it", []time.Duration{59 * time.Second, 58 * time.Second}, true, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Config{})
				p.mu.Lock()
				defer p.mu.Unlock()
				q := p.host("127.0.0.1:25")
				now := time.Now()
				for _, d := range tc.ago {
					q.accepted = append(q.accepted, now.Add(-d))
				}
				q.hs.ConnsPerWindow = 4
				if strings.Contains(tc.name, "refusal") {
					q.loweredAt = now.Add(-57 * time.Second)
				}
				ok := p.windowSlotLocked(q, now)
				if ok != tc.ok || q.winCount != tc.count || !q.winStart.Equal(now.Add(-tc.startAgo)) {
					t.Fatalf("slot %v, %d in the window from %v ago; want %v, %d from %v ago", ok, q.winCount, now.Sub(q.winStart), tc.ok, tc.count, tc.startAgo)
				}
				if q.timer != nil {
					q.timer.Stop()
				}
			})
		})
	}
}

// TestNewAddressesFirstAtWindowedHost: a greylisting host that takes 4
// connections a window (known from before) and 5 RCPTs a session, 25
// addresses and the catch-all probe: the first window's 4 sessions send
// 20 of them, the retries come due at 5 s, and the next window (at 12 s)
// has the 6 new addresses and the 20 retries for its 4 sessions (20
// RCPTs). New addresses go first: their retries come due within that
// window, and the next one (at 24 s) sends them with the 6 retries left.
// (Retries first left the 6 new addresses to a later session, whose
// retries came due only at 29 s.)
func TestNewAddressesFirstAtWindowedHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			window = 10 * time.Second
			grey   = 5 * time.Second
		)
		boxes, addrs := halfMissing("win.test", 25)
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "win.test", Mailboxes: boxes, Greylist: grey,
			ConnRateLimit: 4, ConnRateWindow: window, RcptLimit: 5})
		p := e.prober(func(c *Config) {
			c.GreylistRetry, c.RefusalWindow, c.MaxRcptPerSession, c.CommandTimeout = grey, window, 5, time.Minute
		})
		p.cfg.HostMemory.Learn(e.w.MXAddrs("win.test")[0], HostState{ConnsPerWindow: 4, Answered: true})
		t0 := time.Now()
		probeHalfMissing(t, e, p, "win.test", addrs)
		took := time.Since(t0)
		hs := hostStats(e, "mx1.win.test")
		if hs.Rejected != 0 || hs.Total != 11 || took != 24*time.Second+time.Millisecond {
			t.Fatalf("%d sessions (%d refused) in %v; want 11, none refused, in 24.001s", hs.Total, hs.Rejected, took)
		}
	})
}
