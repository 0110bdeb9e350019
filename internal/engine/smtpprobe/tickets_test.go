package smtpprobe

import (
	"fmt"
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
// none of their connections.
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
		took     time.Duration
	}{
		{"no fleet", false, 1, 7, 12*time.Second + time.Millisecond},
		{"one process on a fleet", true, 1, 7, 12*time.Second + time.Millisecond},
		{"two processes on a fleet", true, 2, 13, 35*time.Second + 6*time.Millisecond},
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
				if hs.Rejected != 0 || hs.Total != tc.sessions || took != tc.took {
					t.Fatalf("%d sessions (%d refused) in %v; want %d, none refused, in %v", hs.Total, hs.Rejected, took, tc.sessions, tc.took)
				}
			})
		})
	}
}
