package smtpprobe

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// RFC 5321 §4.5.3.2 timeouts: a deadline per reply, restarted by every
// reply, of 5 minutes for MAIL and RCPT (Config.CommandTimeout's default).
// The servers below sleep before every reply once a transaction has had a
// refused recipient (a bad-recipient throttle) and name themselves Exim,
// whose pauses come per rejection (no slow-reply drop).
func TestReplyTimeouts(t *testing.T) {
	const rtt = 10 * time.Millisecond
	for _, tc := range []struct {
		name  string
		sleep time.Duration // before each reply after the first refusal
		boxes int           // addresses: the first unknown, the others exist
		// want: the wall time, sessions, and every verdict strict.
		wall     time.Duration
		sessions int
	}{
		// 10 replies 4 minutes apart after the setup's round trips and the
		// first RCPT's: 36 minutes for the group, alive as long as replies
		// keep coming.
		{name: "replies keep coming", sleep: 4 * time.Minute, boxes: 10,
			wall: 3*rtt + 9*4*time.Minute, sessions: 1},
		// A reply later than 5 minutes after the one before ends the
		// session exactly then (no QUIT: it is broken); the address behind
		// it goes to the next session (3 round trips).
		{name: "a reply over 5 minutes", sleep: 6 * time.Minute, boxes: 2,
			wall: 3*rtt + rfcReplyTimeout + 3*rtt, sessions: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				boxes := map[string]mailworld.Behaviour{}
				var addrs []string
				for i := range tc.boxes {
					lp := fmt.Sprintf("u%d", i)
					if i > 0 {
						boxes[lp] = mailworld.Exists
					}
					addrs = append(addrs, lp+"@slow.test")
				}
				e := startWorld(t, mailworld.Options{Latency: rtt, IdleTimeout: time.Hour},
					mailworld.Domain{Name: "slow.test", Mailboxes: boxes, BadRcptThrottle: 1, BadRcptSleep: tc.sleep,
						Banner: "ESMTP Exim 4.96"})
				p := e.prober(func(c *Config) { c.CommandTimeout = 0; c.MaxConnsPerHost = 1 })
				mx := e.mx("slow.test")
				res := make([]Result, len(addrs))
				t0 := time.Now()
				if err := p.ProbeBatch(context.Background(), "slow.test", mx, addrs, res); err != nil {
					t.Fatal(err)
				}
				wall := time.Since(t0)
				for i, r := range res {
					if truthOf(r.Outcome) != e.w.GroundTruth(addrs[i]) {
						t.Errorf("%s: %v %q %v", addrs[i], r.Outcome, r.Reply, r.Err)
					}
				}
				if hs := hostStats(e, "mx1.slow.test"); wall != tc.wall || hs.Total != tc.sessions {
					t.Errorf("took %v in %d sessions, want %v in %d", wall, hs.Total, tc.wall, tc.sessions)
				}
			})
		})
	}
}

// A slow host is slow, not failed, and holds no other host back: a list
// of its addresses waits on its connection while another domain's
// addresses, started after it in the same prober, get their verdicts in a
// few round trips.
func TestSlowHostHoldsNoOtherBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 10 * time.Millisecond
		slowBox, slowAddrs := slowBoxes("slow.test", 120, twoInFive)
		fastBox, fastAddrs := slowBoxes("fast.test", 120, twoInFive)
		e := startWorld(t, mailworld.Options{Latency: rtt}, slowMTA("slow.test", slowBox),
			mailworld.Domain{Name: "fast.test", Mailboxes: fastBox})
		// The old first group of 50: the slow host takes 43s to answer it.
		p := e.prober(func(c *Config) { c.CommandTimeout, c.PipelineStart = 0, 50 })
		slowMX, fastMX := e.mx("slow.test"), e.mx("fast.test")
		slowRes, fastRes := make([]Result, len(slowAddrs)), make([]Result, len(fastAddrs))
		t0 := time.Now()
		slow, err := p.Start(context.Background(), "slow.test", slowMX, slowAddrs, slowRes)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ProbeBatch(context.Background(), "fast.test", fastMX, fastAddrs, fastRes); err != nil {
			t.Fatal(err)
		}
		fastWall := time.Since(t0)
		if err := slow.Wait(); err != nil {
			t.Fatal(err)
		}
		slowWall := time.Since(t0)
		for i, r := range append(slowRes, fastRes...) {
			addr := append(slowAddrs, fastAddrs...)[i]
			if truthOf(r.Outcome) != e.w.GroundTruth(addr) {
				t.Errorf("%s: %v %q %v", addr, r.Outcome, r.Reply, r.Err)
			}
		}
		// fast.test: a few round trips (its setup and groups of 50).
		if fastWall > time.Second || slowWall < 43*time.Second {
			t.Errorf("fast.test took %v (want a few round trips), slow.test %v (want its 43s of held replies at least)", fastWall, slowWall)
		}
	})
}
