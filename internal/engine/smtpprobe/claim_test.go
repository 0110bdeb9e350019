package smtpprobe

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
)

// caRCPTs verifies per addresses of each catch-all domain with every
// prober at once, one domain after another, and returns the catch-all
// probes the server saw: its RCPTs beyond the addresses (every address is
// accepted at once, so nothing is sent twice).
func caRCPTs(t *testing.T, e *env, domains []string, per int, probers ...*Prober) int {
	t.Helper()
	probes := 0
	for _, d := range domains {
		before := hostStats(e, "mx1."+d).RCPT
		probeAll(t, e, d, per, CatchAll, probers...)
		probes += hostStats(e, "mx1."+d).RCPT - before - per*len(probers)
	}
	return probes
}

// catchAllWorld is a world of n catch-all domains: on loopback for the
// tests against Redis, on the wall clock; in memory for a synctest bubble.
func catchAllWorld(t *testing.T, n int, loopback bool) (*env, []string) {
	var doms []mailworld.Domain
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("ca%d.test", i))
		doms = append(doms, mailworld.Domain{Name: names[i], DefaultBehaviour: mailworld.CatchAll})
	}
	start := startWorld
	if loopback {
		start = func(t *testing.T, o mailworld.Options, d ...mailworld.Domain) *env { return loopbackWorld(t, o, d...) }
	}
	return start(t, mailworld.Options{Latency: 20 * time.Millisecond}, doms...), names
}

// Two engines sharing a backend that verify the same catch-all domain at
// the same moment send one catch-all probe between them (the claim), and
// both get CatchAll for every address. Without the shared backend each
// sends its own: the count at the server can tell.
func TestFleetClaimOneProbePerDomain(t *testing.T) {
	t.Parallel()
	url := fleetURL(t)
	e, domains := catchAllWorld(t, 8, true)

	alone := caRCPTs(t, e, domains[:4], 10, e.prober(nil), e.prober(nil))
	if alone != 8 {
		t.Fatalf("engines on their own sent %d catch-all probes for 4 domains, want 8: the test cannot tell", alone)
	}

	f1, f2 := openFleet(t, url, fleet.Options{}), openFleet(t, url, fleet.Options{})
	p1, p2 := e.prober(withFleet(f1, nil)), e.prober(withFleet(f2, nil))
	shared := caRCPTs(t, e, domains[4:], 10, p1, p2)
	s1, s2 := p1.Stats(), p2.Stats()
	if shared != 4 || s1.CatchAllProbes+s2.CatchAllProbes != 4 {
		t.Fatalf("sharing a backend: %d catch-all probes at the server (engines say %d + %d) for 4 domains, want 4",
			shared, s1.CatchAllProbes, s2.CatchAllProbes)
	}
	t.Logf("4 domains: %d probes on their own, %d sharing a backend (%d + %d claims lost)",
		alone, shared, s1.CatchAllClaimsLost, s2.CatchAllClaimsLost)
}

// A claim whose holder died (it claimed and never answered) holds the
// others back until its TTL, then one of them probes: the verdicts are
// right either way, and a verdict the holder shares ends the wait early.
// On a fleet.Memory in a synctest bubble the wait is exact (the claim's
// TTL, then the first poll: a few ms apart here); on the real Redis, whose
// clock runs the TTL, one claim shows the same counts and verdict.
func TestFleetClaimHolderDies(t *testing.T) {
	t.Parallel() // the Redis case waits on Redis's TTLs
	domains := []mailworld.Domain{
		{Name: "ca.test", DefaultBehaviour: mailworld.CatchAll},
		{Name: "ok.test", Mailboxes: aliceOnly},
		{Name: "told.test", DefaultBehaviour: mailworld.CatchAll},
		{Name: "warm.test", Mailboxes: aliceOnly}}
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := startWorld(t, mailworld.Options{}, domains...)
			m := fleet.NewMemory(nil)
			open := func() *fleet.Fleet {
				f := fleet.OpenMemory(context.Background(), m, fleet.Options{LeaseTTL: time.Second, HealthInterval: 100 * time.Millisecond})
				t.Cleanup(func() { _ = f.Close() })
				return f
			}
			f, dead := open(), open()
			const poll = 2 * time.Millisecond
			p := e.prober(withFleet(f, nil))
			p.claimPoll = func(*job) time.Duration { return poll }
			// The first poll after the TTL takes the claim: between poll/2
			// and 3 poll/2 later.
			claimHolderDies(t, e, p, dead, time.Second, []string{"a@ca.test", "alice@ok.test"}, func(took, ttl time.Duration) bool {
				return took >= ttl && took <= ttl+3*poll/2
			})
		})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		url := fleetURL(t)
		e := loopbackWorld(t, mailworld.Options{}, domains...)
		f := openFleet(t, url, fleet.Options{})
		dead := openFleet(t, url, fleet.Options{}) // the holder's process
		// The probe must still find the claim held when it gets to it (a
		// session and a few round trips to the backend after the claim):
		// 1.5s leaves a loaded machine room (1s ran out before it once).
		// Not before the claim's TTL (Redis's clock; its reply is prompt).
		// After it, the poll (250-750ms apart for a call) finds the claim
		// free: a waiter that never polled would have got Timeout at the
		// call's 20s, not the verdict, and would have lost no claim.
		claimHolderDies(t, e, e.prober(withFleet(f, nil)), dead, 1500*time.Millisecond, []string{"a@ca.test"}, func(took, ttl time.Duration) bool {
			return took >= ttl-100*time.Millisecond
		})
	})
}

// claimHolderDies: for each of addrs, dead claims its domain's catch-all
// probe for ttl and never answers; p's verification of it must come after
// the claim's TTL (tookOK), with one claim lost and one probe of its own.
// Then a live holder's shared verdict ends p's wait without a probe.
func claimHolderDies(t *testing.T, e *env, p *Prober, dead *fleet.Fleet, ttl time.Duration, addrs []string, tookOK func(took, ttl time.Duration) bool) {
	ctx := ctxTimeout(t, 20*time.Second)
	// A new backend holds leases back for a while (fleet.Fleet): past it
	// first, so that the waits below are the claims'.
	if r := p.Probe(ctx, e.mx("warm.test"), "alice@warm.test"); r.Outcome != Deliverable {
		t.Fatalf("warm-up: %v %v", r.Outcome, r.Err)
	}
	for _, addr := range addrs {
		want, domain := CatchAll, addr[strings.IndexByte(addr, '@')+1:]
		if domain == "ok.test" {
			want = Deliverable
		}
		mx := e.mx(domain) // before the claim: its TTL runs from there
		// From before the claim, so that the TTL is all inside took
		// however long the claim's reply takes on a loaded machine.
		start := time.Now()
		if ok, err := dead.Claim(ctx, claimName(domain), "dead-holder", ttl); !ok || err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
		before := p.Stats()
		r := p.Probe(ctx, mx, addr)
		took, st := time.Since(start), p.Stats()
		if r.Outcome != want {
			t.Fatalf("%s: %v %q %v, want %v", addr, r.Outcome, r.Reply, r.Err, want)
		}
		if !tookOK(took, ttl) {
			t.Fatalf("%s took %v: want the claim's TTL (%v), then the first poll", addr, took, ttl)
		}
		if st.CatchAllProbes-before.CatchAllProbes != 1 || st.CatchAllClaimsLost-before.CatchAllClaimsLost != 1 {
			t.Fatalf("%s: %d probes, %d claims lost; want 1 and 1", addr,
				st.CatchAllProbes-before.CatchAllProbes, st.CatchAllClaimsLost-before.CatchAllClaimsLost)
		}
		t.Logf("%s: %v after %v", addr, r.Outcome, took.Round(time.Millisecond))
	}

	// A live holder shares its verdict: no probe, no wait for the TTL.
	if ok, _ := dead.Claim(ctx, claimName("told.test"), "live-holder", time.Minute); !ok {
		t.Fatal("claim not taken")
	}
	time.AfterFunc(200*time.Millisecond, func() { _ = dead.SetCatchAll(context.Background(), "told.test", true, time.Minute) })
	start := time.Now()
	before := p.Stats().CatchAllProbes
	if r := p.Probe(ctx, e.mx("told.test"), "a@told.test"); r.Outcome != CatchAll {
		t.Fatalf("told.test: %v %q", r.Outcome, r.Reply)
	}
	// Not woken, the call would have polled a claim held for a minute
	// until its 20s ran out: Timeout, not the verdict.
	if p.Stats().CatchAllProbes != before {
		t.Fatalf("told.test: %d probes sent after %v: want the holder's verdict", p.Stats().CatchAllProbes-before, time.Since(start))
	}
}

// With fleet.Local as the learnt state nothing changes for one engine
// (one probe, the right verdicts, the cache), and two engines sharing
// it in one process send one probe between them.
func TestLocalClaimAsBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, domains := catchAllWorld(t, 4, false)
		l := fleet.NewLocal(0, nil)
		local := func(c *Config) { c.Limiter, c.Learnt = l, l }
		p := e.prober(local)
		if n := caRCPTs(t, e, domains[:1], 10, p); n != 1 || p.Stats().CatchAllClaimsLost != 0 {
			t.Fatalf("one engine: %d probes, %d claims lost; want 1 and none", n, p.Stats().CatchAllClaimsLost)
		}
		if n := caRCPTs(t, e, domains[:1], 5, p); n != 0 {
			t.Fatalf("one engine again: %d probes, want the cached verdict", n)
		}
		p1, p2 := e.prober(local), e.prober(local)
		if n := caRCPTs(t, e, domains[1:], 10, p1, p2); n != 3 {
			t.Fatalf("two engines on one Local: %d probes for 3 domains, want 3", n)
		}
	})
}

// A probe waiting for another process's claim is woken by that process:
// by its verdict (no probe here), or by its giving the claim up (a probe
// of its own). The safety-net poll is an hour here and the call has 20 s,
// so an answer at all is the wake-up's; the holder acts only once the
// waiter has lost the claim.
func TestFleetClaimWaiterWoken(t *testing.T) {
	t.Parallel()
	url := fleetURL(t)
	e := loopbackWorld(t, mailworld.Options{},
		mailworld.Domain{Name: "told.test", DefaultBehaviour: mailworld.CatchAll},
		mailworld.Domain{Name: "gave.test", DefaultBehaviour: mailworld.CatchAll},
		mailworld.Domain{Name: "warm.test", Mailboxes: aliceOnly})
	f, holder := openFleet(t, url, fleet.Options{}), openFleet(t, url, fleet.Options{})
	p := e.prober(withFleet(f, nil))
	p.claimPoll = func(*job) time.Duration { return time.Hour }
	ctx := ctxTimeout(t, 20*time.Second)
	if r := p.Probe(ctx, e.mx("warm.test"), "alice@warm.test"); r.Outcome != Deliverable {
		t.Fatalf("warm-up: %v %v", r.Outcome, r.Err)
	}
	for _, tc := range []struct {
		domain string
		end    func(ctx context.Context, domain string) error
		probes uint64
	}{
		{"told.test", func(ctx context.Context, d string) error { return holder.SetCatchAll(ctx, d, true, time.Minute) }, 0},
		{"gave.test", func(ctx context.Context, d string) error { return holder.Unclaim(ctx, claimName(d), "live-holder") }, 1},
	} {
		if ok, err := holder.Claim(ctx, claimName(tc.domain), "live-holder", time.Minute); !ok || err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
		before := p.Stats()
		ended := make(chan error, 1)
		go func() { // once the waiter has lost the claim
			realtime.Until(ctx, func() bool { return p.Stats().CatchAllClaimsLost != before.CatchAllClaimsLost })
			ended <- tc.end(ctx, tc.domain)
		}()
		r := p.Probe(ctx, e.mx(tc.domain), "a@"+tc.domain)
		if err := <-ended; err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		if r.Outcome != CatchAll || st.CatchAllProbes-before.CatchAllProbes != tc.probes || st.CatchAllClaimsLost-before.CatchAllClaimsLost != 1 {
			t.Fatalf("%s: %v %q %v, %d probes, %d claims lost; want CatchAll, %d probes, 1 claim lost", tc.domain, r.Outcome, r.Reply, r.Err,
				st.CatchAllProbes-before.CatchAllProbes, st.CatchAllClaimsLost-before.CatchAllClaimsLost, tc.probes)
		}
	}
}
