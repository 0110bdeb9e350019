package smtpprobe

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// slowMTA is the slow real MTA measured in issue 34: 25 recipients a
// message, then "452 4.5.3 too many recipients"; a second before every
// reply once three recipients of the transaction were refused; a pipelined
// group answered only once all of it was processed. Its greeting does not
// name it.
func slowMTA(name string, boxes map[string]mailworld.Behaviour) mailworld.Domain {
	return mailworld.Domain{Name: name, Mailboxes: boxes, TxRcptLimit: 25,
		BadRcptThrottle: 3, BadRcptSleep: time.Second, WholeGroups: true, Banner: "ESMTP"}
}

// twoInFive: two addresses of every five unknown.
func twoInFive(i int) bool { return i%5 == 1 || i%5 == 3 }

// slowBoxes makes n addresses at domain, those for which unknown says so
// unknown.
func slowBoxes(domain string, n int, unknown func(int) bool) (map[string]mailworld.Behaviour, []string) {
	boxes := map[string]mailworld.Behaviour{}
	var addrs []string
	for i := range n {
		local := fmt.Sprintf("u%03d", i)
		if !unknown(i) {
			boxes[local] = mailworld.Exists
		}
		addrs = append(addrs, local+"@"+domain)
	}
	return boxes, addrs
}

// slowRun is what one list against the slow MTA took.
type slowRun struct {
	Wall                       time.Duration
	Sessions, MAIL, RCPT, RSET int
	Slowed                     int // replies the server held back (its throttle)
	Strict, Unverified         int // verdicts equal to the ground truth; code 20 ("unconfirmed")
}

// runSlowMTA checks n addresses (unknown ones as unknown says) at a slow
// MTA (round trip rtt) in one list call (no deadline) with the test
// config changed by mod, and reports what it took, in simulated time.
func runSlowMTA(t *testing.T, n int, unknown func(int) bool, rtt time.Duration, mod func(*Config)) slowRun {
	boxes, addrs := slowBoxes("slow.test", n, unknown)
	e := startWorld(t, mailworld.Options{Latency: rtt}, slowMTA("slow.test", boxes))
	p := e.prober(func(c *Config) {
		c.CommandTimeout = 0 // the default: RFC 5321's
		c.MaxConnsPerHost = 1
		if mod != nil {
			mod(c)
		}
	})
	mx := e.mx("slow.test")
	res := make([]Result, len(addrs))
	t0 := time.Now()
	if err := p.ProbeBatch(context.Background(), "slow.test", mx, addrs, res); err != nil {
		t.Fatal(err)
	}
	r := slowRun{Wall: time.Since(t0)}
	for i, v := range res {
		if truthOf(v.Outcome) == e.w.GroundTruth(addrs[i]) {
			r.Strict++
		}
		if v.Outcome == Unconfirmed {
			r.Unverified++
		}
	}
	hs := hostStats(e, "mx1.slow.test")
	r.Sessions, r.MAIL, r.RCPT, r.RSET, r.Slowed = hs.Total, hs.MAIL, hs.RCPT, hs.RSET, hs.Slowed
	return r
}

// The slow MTA gets a strict verdict for every address, in simulated
// time. The engine's defaults (a first group of PipelineStart RCPTs, the
// RFC's reply timeout) pay the throttle once, in the first group; the
// issue's old settings (all 50 RCPTs pipelined in one group, 30s for its
// replies) lose every row: the server sleeps through the group's refused
// recipients for longer than 30s before its first reply. RFC timeouts
// alone save the rows, at the throttle's price.
func TestSlowMTA(t *testing.T) {
	const rtt = 10 * time.Millisecond
	old := func(c *Config) { c.PipelineStart, c.CommandTimeout = 50, 30*time.Second }
	rfcOnly := func(c *Config) { c.PipelineStart = 50 }
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want func(t *testing.T, r slowRun)
	}{
		{"defaults", nil, func(t *testing.T, r slowRun) {
			// The first group (10 RCPTs, 4 refused) is answered after the
			// 3 replies that follow the third refusal were held (3s): the
			// throttle is learnt at 3. From then on no transaction takes
			// more RCPTs in a window than it may still refuse (3 in a new
			// one); RSETs are within the 10 non-mail commands a session
			// of a server that does not name itself. Every address is
			// asked once.
			// Held replies after the first group: the QUIT of sessions
			// that end with 3 refusals in their transaction (at most one
			// a session). While the host's limit per transaction is not
			// known a window holds one transaction (txPlanLocked), which
			// takes RCPTs until 3 of its own are refused: 2 sessions of
			// 8 transactions.
			if r.Sessions != 2 || r.MAIL != 16 || r.RSET != 14 || r.RCPT != 120 || r.Slowed < 3 || r.Slowed > 3+r.Sessions {
				t.Errorf("want 2 sessions of 8 transactions, 120 RCPTs, 3 held replies and at most one a session more: %+v", r)
			}
			if held := time.Duration(r.Slowed) * time.Second; r.Wall < 3*time.Second || r.Wall > held+time.Second {
				t.Errorf("wall %v: want the first group's 3s of held replies, at most the server's %v of them and 1s of round trips", r.Wall, held)
			}
		}},
		{"rfc timeouts, group of 50", rfcOnly, func(t *testing.T, r slowRun) {
			// The first group: MAIL and 50 RCPTs, 25 answered (10
			// refused), 25 "452"; every reply after the third refusal
			// held a second (43s): answered as a whole, well within the
			// RFC's 5 minutes.
			if r.Wall < 43*time.Second || r.Wall > 50*time.Second {
				t.Errorf("wall %v: want about 43s of held replies", r.Wall)
			}
		}},
		{"old: group of 50, 30s", old, func(t *testing.T, r slowRun) {
			// As measured: nothing came in 30s, the session was closed
			// mid-group and the host counted as failed.
			if r.Unverified != 120 || r.Sessions != 1 || r.Wall != 30*time.Second+2*rtt {
				t.Errorf("want every row unverified after one session of 30s and the setup's round trips: %+v", r)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := runSlowMTA(t, 120, twoInFive, rtt, tc.mod)
				t.Logf("%+v", r)
				if tc.name != "old: group of 50, 30s" && (r.Strict != 120 || r.Unverified != 0) {
					t.Errorf("%d strict, %d unverified of 120", r.Strict, r.Unverified)
				}
				tc.want(t, r)
			})
		})
	}
}

// A slow MTA whose addresses all exist: its "452 4.5.3" after 25
// recipients settles the limit at once, in the same session; the
// recipients that met it go in the next transaction and are never
// refused or unverified.
func TestSlowMTARcptLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		none := func(int) bool { return false }
		r := runSlowMTA(t, 120, none, 10*time.Millisecond, nil)
		t.Logf("%+v", r)
		// Windows of 10 RCPTs (the first group; then, the limit unknown,
		// at most PipelineStart past the most a transaction took) fill
		// the first transaction to 25 (5 "452", fewer than a window: at
		// most PipelineStart-1 past the limit); the next window is one RCPT in a new transaction (a 452
		// there would be a limit per session), which later windows fill to
		// 25. The catch-all probe (refused) rides along: 121 RCPTs
		// answered in 5 transactions, 5 met the limit, in one session.
		if r.Strict != 120 || r.Unverified != 0 || r.Sessions != 1 || r.MAIL != 5 || r.RCPT != 121+5 || r.Slowed != 0 {
			t.Errorf("want 120 strict in one session of 5 transactions, 126 RCPTs, no held reply: %+v", r)
		}
	})
}
