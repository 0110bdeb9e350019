package smtpprobe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"net/netip"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// A deferred address holds nothing: with one session allowed in all, a
// domain probed while another waits out its greylisting delay gets the
// session at once, and the deferred address is retried afterwards.
func TestDeferralHoldsNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grey = 800 * time.Millisecond
		e := startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "grey.test", Greylist: grey, Mailboxes: aliceOnly},
			mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes},
		)
		p := e.prober(func(c *Config) {
			c.MaxSessions, c.MaxConnsPerHost, c.GreylistRetry = 1, 1, grey
		})
		t0 := time.Now()
		greyRes := make([]Result, 2)
		pd, err := p.Start(ctxTimeout(t, 5*time.Second), "grey.test", e.mx("grey.test"), []string{"alice@grey.test", "nobody@grey.test"}, greyRes)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// Both addresses and the catch-all probe: a 451 proves nothing.
		if st := p.Stats(); st.Deferred != 3 {
			t.Fatalf("not deferred at once: %+v", st)
		}
		// The deferred addresses wait in the heap: the only session slot is
		// free once the greylisting domain's idle session ends (holdIdle).
		r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("ok.test"), "bob@ok.test")
		if r.Outcome != Full {
			t.Fatalf("ok.test during the deferral: %+v", r)
		}
		if took := time.Since(t0); took != holdIdle {
			t.Fatalf("ok.test answered after %v, want when the idle session ended (%v), not after the deferral (%v)", took, holdIdle, grey)
		}
		if err := pd.Wait(); err != nil {
			t.Fatal(err)
		}
		if greyRes[0].Outcome != Deliverable || greyRes[1].Outcome != Missing {
			t.Fatalf("greylisted: %+v", greyRes)
		}
		if took := time.Since(t0); took != grey {
			t.Fatalf("greylisted answers after %v, want at the %v retry", took, grey)
		}
		// The three deferred (the catch-all probe too) are retried
		// together, 800ms after they were deferred.
		if st := p.Stats(); st.Retries != 3 || st.OpenSessionsPeak != 1 || st.DeferredTime != 3*grey {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A world of tarpits finishes in about one greeting timeout, not one per
// domain: their sessions wait side by side.
func TestAllTarpits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, step = 60, 300 * time.Millisecond
		var doms []mailworld.Domain
		for i := range n {
			doms = append(doms, mailworld.Domain{Name: fmt.Sprintf("pit%d.test", i), Tarpit: true})
		}
		e := startWorld(t, mailworld.Options{}, doms...)
		p := e.prober(func(c *Config) { c.GreetingTimeout = step })
		// Resolved first, so that the 60 calls start at one moment.
		mx := make([][]mxdns.MXHost, n)
		for i, d := range doms {
			mx[i] = e.mx(d.Name)
		}
		t0 := time.Now()
		var pds []*Pending
		res := make([][]Result, n)
		for i, d := range doms {
			res[i] = make([]Result, 2)
			pd, err := p.Start(context.Background(), d.Name, mx[i], []string{"a@" + d.Name, "b@" + d.Name}, res[i])
			if err != nil {
				t.Fatal(err)
			}
			pds = append(pds, pd)
		}
		for _, pd := range pds {
			if err := pd.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(t0)
		for i := range res {
			for _, r := range res[i] {
				if r.Outcome != Timeout || !errors.Is(r.Err, ErrAllHostsFailed) || !errors.Is(r.Err, os.ErrDeadlineExceeded) {
					t.Fatalf("%s: %+v", doms[i].Name, r)
				}
			}
		}
		if took != step {
			t.Fatalf("%d tarpit domains took %v, want one %v timeout", n, took, step)
		}
		if st := p.Stats(); st.Stalled != n || st.OpenSessionsPeak != n {
			t.Fatalf("stats %+v", st)
		}
	})
}

// Concurrent calls for one domain share one catch-all probe.
func TestCatchAllCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{Latency: 10 * time.Millisecond},
			mailworld.Domain{Name: "ca.test", DefaultBehaviour: mailworld.CatchAll},
			mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes},
		)
		p := e.prober(nil)
		ctx := ctxTimeout(t, 5*time.Second)
		var wg sync.WaitGroup
		for i := range 10 {
			for _, d := range []string{"ca.test", "ok.test"} {
				wg.Go(func() {
					want := CatchAll
					addr := fmt.Sprintf("u%d@%s", i, d)
					if d == "ok.test" {
						want, addr = Deliverable, "alice@ok.test"
					}
					if r := p.Probe(ctx, e.mx(d), addr); r.Outcome != want {
						t.Errorf("%s: %+v", addr, r)
					}
				})
			}
		}
		wg.Wait()
		if st := p.Stats(); st.CatchAllProbes != 2 {
			t.Fatalf("%d catch-all probes for two domains: %+v", st.CatchAllProbes, st)
		}
	})
}

// The catch-all probe's owner giving up (its deadline) hands the probe to
// a call still waiting for the verdict.
func TestCatchAllOwnerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{Latency: 50 * time.Millisecond},
			mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes},
		)
		p := e.prober(nil)
		short := make([]Result, 1)
		pd1, _ := p.Start(ctxTimeout(t, 130*time.Millisecond), "ok.test", e.mx("ok.test"), []string{"alice@ok.test"}, short)
		simtime.Advance(5 * time.Millisecond)
		r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("ok.test"), "alice@ok.test")
		pd1.Wait()
		if r.Outcome != Deliverable {
			t.Fatalf("the waiting call: %+v", r)
		}
	})
}

// Sessions belong to hosts, not calls: many domains hosted at one provider
// share a few sessions.
func TestSessionsSharedAcrossDomains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var doms []mailworld.Domain
		for i := range 20 {
			doms = append(doms, mailworld.Domain{Name: fmt.Sprintf("d%d.test", i), Provider: "shared.test", Mailboxes: aliceOnly})
		}
		e := startWorld(t, mailworld.Options{Latency: 5 * time.Millisecond}, doms...)
		p := e.prober(nil)
		var pds []*Pending
		res := make([][]Result, len(doms))
		addrs := []string{"alice", "bob", "carol", "dave", "erin"}
		for i, d := range doms {
			var as []string
			for _, a := range addrs {
				as = append(as, a+"@"+d.Name)
			}
			res[i] = make([]Result, len(as))
			pd, _ := p.Start(ctxTimeout(t, 5*time.Second), d.Name, e.mx(d.Name), as, res[i])
			pds = append(pds, pd)
		}
		for _, pd := range pds {
			pd.Wait()
		}
		for i := range res {
			for j, r := range res[i] {
				if truthOf(r.Outcome) != e.w.GroundTruth(addrs[j]+"@"+doms[i].Name) {
					t.Fatalf("%s@%s: %+v", addrs[j], doms[i].Name, r)
				}
			}
		}
		// 100 RCPTs at 100 a session: no catch-all probe (every domain's
		// "user unknown" answers settle it).
		if hs := hostStats(e, "mx1.shared.test"); hs.Total > 3 || hs.RCPT != 100 {
			t.Fatalf("mx1.shared.test: %+v", hs)
		}
	})
}

// With PIPELINING, a session sends several transactions per round trip.
func TestPipelinedTransactions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rtt = 40 * time.Millisecond
		boxes := map[string]mailworld.Behaviour{}
		var addrs []string
		for i := range 64 {
			lp := fmt.Sprintf("u%d", i)
			addrs = append(addrs, lp+"@slow.test")
			if i%2 == 0 {
				boxes[lp] = mailworld.Exists
			}
		}
		e := startWorld(t, mailworld.Options{Latency: rtt}, mailworld.Domain{Name: "slow.test", Mailboxes: boxes})
		for _, depth := range []int{1, 8} {
			p := e.prober(func(c *Config) { c.MaxConnsPerHost = 1; c.PipelineDepth = depth })
			res := make([]Result, len(addrs))
			t0 := time.Now()
			if err := p.ProbeBatch(ctxTimeout(t, 20*time.Second), "slow.test", e.mx("slow.test"), addrs, res); err != nil {
				t.Fatal(err)
			}
			took := time.Since(t0)
			for i, r := range res {
				if truthOf(r.Outcome) != e.w.GroundTruth(addrs[i]) {
					t.Fatalf("depth %d: %s: %+v", depth, addrs[i], r)
				}
			}
			// 65 transactions: depth 1 needs a round trip each; depth 8 one a
			// window of 8, with the greeting and EHLO before them.
			rounds := (65 + depth - 1) / depth
			if took < time.Duration(rounds)*rtt || took > time.Duration(rounds+4)*rtt {
				t.Errorf("depth %d: %v, want %d round trips of %v and the session's setup", depth, took, rounds, rtt)
			}
		}
	})
}

// A host's own limit per session (452 4.5.3 after N RCPTs) is learnt: the
// first session meets it, later ones stop short of it.
func TestLearnsRcptLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, func(f *fakeSMTP) {
			f.rcpt = func(_, n int, rcpt string) string {
				if n > 5 {
					return "452 4.5.3 Error: too many recipients"
				}
				return "550 5.1.1 unknown"
			}
		})
		p, mx := fakeProber(t, func(c *Config) { c.MaxConnsPerHost = 1 }, f)
		var addrs []string
		for i := range 40 {
			addrs = append(addrs, fmt.Sprintf("no%d@fake.test", i))
		}
		res := make([]Result, len(addrs))
		if err := p.ProbeBatch(ctxTimeout(t, 5*time.Second), "fake.test", mx, addrs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Outcome != Missing {
				t.Fatalf("%s: %+v", addrs[i], r)
			}
		}
		// 40 at 5 a session (no catch-all probe: the "user unknown" answers
		// settle it): 8 sessions. The first sent a first group
		// (PipelineStart RCPTs) in one pipelined transaction (all but 5 met
		// the limit: "452" after 5 could be a limit per transaction), then
		// one RCPT in a new transaction, whose 452 showed the limit is per
		// session.
		first := p.Config().PipelineStart
		if n, st := f.nSessions(), p.Stats(); n != 8 || st.SessionLimits != 1 || st.CatchAllProbes != 0 || f.count("RCPT") != 40+(first-5)+1 {
			t.Fatalf("%d sessions, %d RCPTs, stats %+v", n, f.count("RCPT"), st)
		}
	})
}

// MX hosts whose address the guard refuses are never dialled: the probe
// moves on to the next host.
func TestAllowAddr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes, MXHosts: 2})
		mx := e.mx("ok.test")
		denied := mx[0].Addrs[0]
		var dc dialCounter
		p := e.prober(func(c *Config) {
			c.Dialer = dc.dialer(e.dial)
			c.AllowAddr = func(a netip.Addr) error {
				if a == denied {
					return errors.New("not public")
				}
				return nil
			}
		})
		r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "alice@ok.test")
		if r.Outcome != Deliverable || r.Host != "mx2.ok.test" || dc.count(e.w.MXAddrs("ok.test")[0]) != 0 {
			t.Fatalf("got %+v, dials %v", r, dc.n)
		}
		r = p.Probe(ctxTimeout(t, 5*time.Second), []mxdns.MXHost{mx[0]}, "alice@ok.test")
		if r.Outcome != Unconfirmed || !errors.Is(r.Err, ErrNotAllowed) {
			t.Fatalf("only a denied host: %+v", r)
		}
	})
}

// TestPostfixErrorBudget: against a server that says Postfix in its
// greeting and behaves as Postfix does by default (every reply held back
// once the session has made 10 errors, closed at 20), a list where half the
// mailboxes are missing gets every verdict right without a single reply
// being held back: sessions end at the rejection budget and the next one
// starts afresh. Without the budget the same list trips the server.
func TestPostfixErrorBudget(t *testing.T) {
	boxes, addrs := halfMissing("pf.test", 80)
	dom := mailworld.Domain{Name: "pf.test", Mailboxes: boxes, SoftErrors: 10, HardErrors: 20, ErrorSleep: 50 * time.Millisecond}

	for _, tc := range []struct {
		name   string
		budget int
	}{{"budget", 0}, {"no budget", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := startWorld(t, mailworld.Options{}, dom)
				p := e.prober(func(c *Config) { c.MaxRejectsPerSession = tc.budget; c.CommandTimeout = 10 * time.Second })
				probeHalfMissing(t, e, p, "pf.test", addrs)
				hs := hostStats(e, "mx1.pf.test")
				if tc.budget < 0 {
					if hs.Slowed == 0 {
						t.Fatalf("without a budget the server never slowed down (%+v): the test proves nothing", hs)
					}
					return
				}
				// 40 missing mailboxes and a catch-all probe: at least 5 sessions of 9.
				if hs.Slowed != 0 || hs.TooManyErrors != 0 || hs.Total < 5 {
					t.Fatalf("host stats %+v: want no reply held back, no session closed for errors, at least 5 sessions", hs)
				}
			})
		})
	}
}

// TestLearnsErrorBudget: a Postfix that hides its name in the greeting
// (smtpd_banner = $myhostname ESMTP) gets no budget at first; the first
// session that it slows down is dropped at the first held-back reply, its
// addresses go to a fresh session, and later sessions keep to the number of
// rejections the host showed. Every verdict is right and the server hangs
// up on nobody.
func TestLearnsErrorBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boxes, addrs := halfMissing("hidden.test", 80)
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "hidden.test", Mailboxes: boxes,
			SoftErrors: 10, HardErrors: 20, ErrorSleep: time.Second, Banner: "ESMTP"})
		p := e.prober(func(c *Config) { c.CommandTimeout = 30 * time.Second; c.MaxConnsPerHost = 1 })
		start := time.Now()
		probeHalfMissing(t, e, p, "hidden.test", addrs)
		hs := hostStats(e, "mx1.hidden.test")
		// One held-back reply (or a few, as the dropped session's last
		// pipelined replies were already on their way) teaches the budget.
		if hs.TooManyErrors != 0 || hs.Slowed > 3 {
			t.Fatalf("host stats %+v: want no hang-up and at most a few held-back replies", hs)
		}
		// The held-back replies (ErrorSleep, 1s each) are all the time the
		// list took, but for moments.
		if d := time.Since(start); d >= time.Duration(hs.Slowed+1)*time.Second {
			t.Fatalf("took %v with %d replies held back: later sessions were slowed too", d, hs.Slowed)
		}
	})
}

// halfMissing makes n addresses at domain, every other one an existing
// mailbox (the even ones), and the mailboxes to declare.
func halfMissing(domain string, n int) (map[string]mailworld.Behaviour, []string) {
	boxes := map[string]mailworld.Behaviour{}
	var addrs []string
	for i := range n {
		local := fmt.Sprintf("user%d", i)
		if i%2 == 0 {
			boxes[local] = mailworld.Exists
		}
		addrs = append(addrs, local+"@"+domain)
	}
	return boxes, addrs
}

// probeHalfMissing probes halfMissing's addresses and requires every
// verdict: deliverable, missing, deliverable...
func probeHalfMissing(t *testing.T, e *env, p *Prober, domain string, addrs []string) {
	t.Helper()
	res := make([]Result, len(addrs))
	if err := p.ProbeBatch(ctxTimeout(t, time.Minute), domain, e.mx(domain), addrs, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := Missing
		if i%2 == 0 {
			want = Deliverable
		}
		if r.Outcome != want {
			t.Fatalf("%s: %v (%v), want %v", addrs[i], r.Outcome, r.Err, want)
		}
	}
}
