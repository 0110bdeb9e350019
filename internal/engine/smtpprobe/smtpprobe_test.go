package smtpprobe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

var (
	okBoxes = map[string]mailworld.Behaviour{
		"alice": mailworld.Exists, "bob": mailworld.Full, "carol": mailworld.Disabled, "dave": mailworld.TempFail,
	}
	aliceOnly = map[string]mailworld.Behaviour{"alice": mailworld.Exists}
)

func TestOutcomes(t *testing.T) {
	domains := []mailworld.Domain{
		{Name: "ok.test", Mailboxes: okBoxes},
		{Name: "ca.test", DefaultBehaviour: mailworld.CatchAll},
		{Name: "policy.test", PolicyReject: true, Mailboxes: aliceOnly},
		{Name: "pd.test", PrimaryDown: true, Mailboxes: aliceOnly},
		{Name: "r452.test", SecondRCPT452: true, Mailboxes: aliceOnly},
		{Name: "r452ca.test", SecondRCPT452: true, DefaultBehaviour: mailworld.CatchAll},
		{Name: "drop.test", DropConnection: true, MXHosts: 2},
		{Name: "droprcpt.test", DropAtRCPT: true, DefaultBehaviour: mailworld.CatchAll},
		{Name: "grey.test", Greylist: 150 * time.Millisecond, Mailboxes: aliceOnly},
		{Name: "greyca.test", Greylist: 150 * time.Millisecond, DefaultBehaviour: mailworld.CatchAll},
		{Name: "greylong.test", Greylist: time.Hour, Mailboxes: aliceOnly},
		{Name: "implicit.test", NoMX: true, Mailboxes: aliceOnly},
		{Name: "alldown.test", AllDown: true, MXHosts: 2, Mailboxes: aliceOnly},
		{Name: "pddrop.test", PrimaryDown: true, DropConnection: true, Mailboxes: aliceOnly},
	}
	for _, tc := range []outcomeCase{
		{addr: "alice@ok.test", want: Deliverable, code: 50, reply: "250 2.1.5", host: "mx1.ok.test"},
		{addr: "ALICE@OK.test", want: Deliverable, code: 50, reply: "250"},
		{addr: "nobody@ok.test", want: Missing, code: 400, reply: "550 5.1.1"},
		{addr: "bob@ok.test", want: Full, code: 410, reply: "552 5.2.2"},
		{addr: "carol@ok.test", want: Missing, code: 400, reply: "550 5.2.1"},   // disabled
		{addr: "dave@ok.test", want: Unconfirmed, code: 20, reply: "450 4.2.1"}, // 4xx every time: retried, then given up
		{addr: "anything@ca.test", want: CatchAll, code: 45, reply: "250"},
		{addr: "alice@policy.test", want: Policy, code: 420, reply: "550 5.7.1"},
		{addr: "alice@pd.test", want: Deliverable, host: "mx2.pd.test"},
		{addr: "nobody@pd.test", want: Missing, host: "mx2.pd.test"},
		{addr: "alice@r452.test", want: Deliverable},
		{addr: "nobody@r452.test", want: Missing, reply: "5.1.1"},
		{addr: "x@r452ca.test", want: CatchAll},
		{addr: "a@drop.test", want: Unconfirmed, code: 20, wantErrIs: ErrAllHostsFailed},
		{addr: "a@droprcpt.test", want: Unconfirmed, wantErrIs: ErrAllHostsFailed},
		{addr: "alice@grey.test", budget: 3 * time.Second, want: Deliverable, reply: "250"},
		{addr: "nobody@grey.test", budget: 3 * time.Second, want: Missing},
		{addr: "x@greyca.test", budget: 3 * time.Second, want: CatchAll},
		// Greylisting outlasting the budget: the retry does not fit, so the
		// probe gives up at once (a 3s retry and a 2s budget) instead of
		// waiting for the deadline.
		{addr: "alice@greylong.test", budget: 2 * time.Second, want: Unconfirmed, grey: true, reply: "451 4.7.1", timed: true, took: 0,
			cfg: func(c *Config) { c.GreylistRetry = 3 * time.Second }},
		// Retries fit but the window outlasts them: two retries 200ms apart,
		// then the verdict at once.
		{addr: "alice@greylong.test", budget: 3 * time.Second, want: Unconfirmed, grey: true, reply: "451", timed: true, took: 400 * time.Millisecond},
		// Greylisting for 150ms: the retry 200ms later passes.
		{addr: "alice@grey.test", budget: time.Second, want: Deliverable, reply: "250", timed: true, took: 200 * time.Millisecond},
		{addr: "alice@implicit.test", want: Deliverable, host: "implicit.test"},
		// Every host refuses the connection on first contact: none ever
		// sent a byte, so no answer (5), not "unconfirmed".
		{addr: "alice@alldown.test", want: Timeout, code: 5, wantErrIs: ErrAllHostsFailed},
		// The primary refuses, the secondary greets and drops: a host of
		// the domain answered, so 20.
		{addr: "alice@pddrop.test", want: Unconfirmed, code: 20, wantErrIs: ErrAllHostsFailed},
	} {
		t.Run(tc.addr+"/"+tc.budget.String(), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { testOutcome(t, startWorld(t, mailworld.Options{}, domains...), tc) })
		})
	}
}

// outcomeCase is a case of TestOutcomes.
type outcomeCase struct {
	addr      string
	budget    time.Duration
	want      Outcome
	code      verify.Code
	reply     string // substring of Result.Reply
	host      string // Result.Host, if set
	grey      bool
	timed     bool          // the probe takes took in simulated time
	took      time.Duration //
	wantErrIs error
	cfg       func(*Config)
}

func testOutcome(t *testing.T, e *env, tc outcomeCase) {
	p := e.prober(tc.cfg)
	budget := tc.budget
	if budget == 0 {
		budget = 5 * time.Second
	}
	dom := tc.addr[strings.LastIndexByte(tc.addr, '@')+1:]
	t0 := time.Now()
	r := p.Probe(ctxTimeout(t, budget), e.mx(dom), tc.addr)
	took := time.Since(t0)
	if r.Outcome != tc.want || r.Greylisted != tc.grey {
		t.Fatalf("%s: got %v (grey %v) %q err %v, want %v (grey %v)", tc.addr, r.Outcome, r.Greylisted, r.Reply, r.Err, tc.want, tc.grey)
	}
	if tc.code != 0 && r.Outcome.Code() != tc.code {
		t.Errorf("code %d, want %d", r.Outcome.Code(), tc.code)
	}
	if !strings.Contains(r.Reply, tc.reply) {
		t.Errorf("reply %q, want it to contain %q", r.Reply, tc.reply)
	}
	if tc.host != "" && r.Host != tc.host {
		t.Errorf("host %q, want %q", r.Host, tc.host)
	}
	if tc.wantErrIs != nil && !errors.Is(r.Err, tc.wantErrIs) {
		t.Errorf("err %v, want %v", r.Err, tc.wantErrIs)
	}
	if tc.timed && took != tc.took {
		t.Errorf("took %v, want %v", took, tc.took)
	}
	if truth := e.w.UnderlyingTruth(tc.addr); tc.want != Unconfirmed && truth != truthOf(r.Outcome) {
		t.Errorf("ground truth %s, got %v", truth, r.Outcome)
	}
}

func TestCatchAllProbeAndCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "ca.test", DefaultBehaviour: mailworld.CatchAll},
			mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes},
		)
		p := e.prober(nil)
		ctx := ctxTimeout(t, 5*time.Second)
		steps := []struct {
			addr string
			want Outcome
			rcpt int // cumulative on the domain's host
		}{
			{"a@ca.test", CatchAll, 2},        // random RCPT and real RCPT, one transaction
			{"b@ca.test", CatchAll, 3},        // verdict cached: one RCPT
			{"alice@ok.test", Deliverable, 2}, // random rejected: not catch-all
			{"alice@ok.test", Deliverable, 3}, // cached
			{"nobody@ok.test", Missing, 4},    // a 5xx needs no catch-all verdict
		}
		for _, s := range steps {
			dom := s.addr[strings.IndexByte(s.addr, '@')+1:]
			r := p.Probe(ctx, e.mx(dom), s.addr)
			if r.Outcome != s.want {
				t.Fatalf("%s: %v %q", s.addr, r.Outcome, r.Reply)
			}
			hs := hostStats(e, "mx1."+dom)
			// One transaction a session: a session carries the next calls'
			// RCPTs too (it waits a moment for more work), in its open
			// transaction, never with RSET and a new MAIL.
			if hs.RCPT != s.rcpt || hs.MAIL != hs.Total || hs.RSET != 0 {
				t.Fatalf("after %s: %+v, want RCPT %d, one MAIL a session, no RSET", s.addr, hs, s.rcpt)
			}
		}
		if st := p.Stats(); st.CatchAllProbes != 2 || st.CatchAllCached != 3 {
			t.Fatalf("stats %+v", st)
		}
		// The random local part looks like one and is not a real mailbox.
		lp := p.randomLocal("ca.test")
		if len(lp) != 24 || strings.Trim(lp, "abcdefghijklmnopqrstuvwxyz0123456789") != "" || lp == p.randomLocal("ok.test") {
			t.Fatalf("random local part %q", lp)
		}
		if New(e.config()).randomLocal("ca.test") == lp {
			t.Fatal("random local part is the same for two probers")
		}

		// TTL: a verdict is kept until its TTL, and an expired verdict is
		// probed again.
		const ttl = 50 * time.Millisecond
		p2 := e.prober(func(c *Config) { c.CatchAllCacheTTL = ttl })
		e.w.ResetStats()
		p2.Probe(ctx, e.mx("ca.test"), "a@ca.test")
		p2.Probe(ctx, e.mx("ca.test"), "b@ca.test")
		simtime.Advance(ttl - time.Nanosecond)
		if r := p2.Probe(ctx, e.mx("ca.test"), "b2@ca.test"); r.Outcome != CatchAll {
			t.Fatalf("before TTL: %v", r.Outcome)
		}
		if hs := hostStats(e, "mx1.ca.test"); hs.RCPT != 4 {
			t.Fatalf("RCPT %d, want 4 (2 + 1 + 1 from the cache)", hs.RCPT)
		}
		simtime.Advance(time.Nanosecond)
		if r := p2.Probe(ctx, e.mx("ca.test"), "c@ca.test"); r.Outcome != CatchAll {
			t.Fatalf("after TTL: %v", r.Outcome)
		}
		if hs := hostStats(e, "mx1.ca.test"); hs.RCPT != 6 {
			t.Fatalf("RCPT %d, want 6 (2 + 1 + 1 + 2 after expiry)", hs.RCPT)
		}
		p2.ForgetCatchAll("CA.test.")
		p2.Probe(ctx, e.mx("ca.test"), "d@ca.test")
		if hs := hostStats(e, "mx1.ca.test"); hs.RCPT != 8 {
			t.Fatalf("RCPT %d after ForgetCatchAll, want 8", hs.RCPT)
		}
	})
}

// A batch's "user unknown" (5.1.1) shows the domain is no catch-all: no
// probe is sent, the accepted addresses are Deliverable, and the verdict
// is cached. A disabled mailbox (5.2.1) proves nothing: a catch-all domain
// may have one.
func TestUserUnknownSettlesCatchAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "ok.test", Mailboxes: aliceOnly},
			mailworld.Domain{Name: "ca.test", DefaultBehaviour: mailworld.CatchAll, Mailboxes: map[string]mailworld.Behaviour{"off": mailworld.Disabled}},
		)
		p := e.prober(nil)
		batch := func(dom string, addrs []string, want []Outcome) {
			t.Helper()
			res := make([]Result, len(addrs))
			if err := p.ProbeBatch(ctxTimeout(t, 5*time.Second), dom, e.mx(dom), addrs, res); err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Outcome != want[i] {
					t.Errorf("%s: %v %q, want %v", addrs[i], r.Outcome, r.Reply, want[i])
				}
			}
		}
		batch("ok.test", []string{"alice@ok.test", "nobody@ok.test", "x@ok.test"}, []Outcome{Deliverable, Missing, Missing})
		if st, hs := p.Stats(), hostStats(e, "mx1.ok.test"); st.CatchAllProbes != 0 || hs.RCPT != 3 {
			t.Fatalf("%d catch-all probes, %d RCPTs: want none and 3", st.CatchAllProbes, hs.RCPT)
		}
		if r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("ok.test"), "alice@ok.test"); r.Outcome != Deliverable || p.Stats().CatchAllCached != 1 {
			t.Fatalf("alice again: %+v, stats %+v: want the cached verdict", r, p.Stats())
		}
		batch("ca.test", []string{"off@ca.test", "a@ca.test", "b@ca.test"}, []Outcome{Missing, CatchAll, CatchAll})
		if st := p.Stats(); st.CatchAllProbes != 1 {
			t.Fatalf("%d catch-all probes at the catch-all domain, want 1", st.CatchAllProbes)
		}

		// A list's batch (no deadline) over several round trips: the first
		// acceptances queue the probe behind the batch's other addresses,
		// whose "user unknown" spares it.
		e.w.ResetStats()
		p2 := e.prober(func(c *Config) { c.MaxConnsPerHost = 1; c.PipelineDepth = 2 })
		addrs := []string{"alice@ok.test", "ALICE@ok.test", "nobody@ok.test", "x@ok.test"}
		res := make([]Result, len(addrs))
		if err := p2.ProbeBatch(context.Background(), "ok.test", e.mx("ok.test"), addrs, res); err != nil {
			t.Fatal(err)
		}
		for i, want := range []Outcome{Deliverable, Deliverable, Missing, Missing} {
			if res[i].Outcome != want {
				t.Errorf("%s: %+v, want %v", addrs[i], res[i], want)
			}
		}
		if st, hs := p2.Stats(), hostStats(e, "mx1.ok.test"); st.CatchAllProbes != 0 || hs.RCPT != len(addrs) {
			t.Fatalf("%d catch-all probes, %d RCPTs over several round trips: want none and %d", st.CatchAllProbes, hs.RCPT, len(addrs))
		}
		for _, c := range []struct {
			r    reply
			want bool
		}{
			{reply{code: 550, enh: "5.1.1", text: "<a@b>: Recipient address rejected: User unknown"}, true},
			{reply{code: 550, text: "Unrouteable address"}, true}, // Exim
			{reply{code: 550, text: "No such user here"}, true},   // no enhanced code
			{reply{code: 550, enh: "5.2.1", text: "Mailbox disabled"}, false},
			{reply{code: 553, enh: "5.1.3", text: "Bad address syntax"}, false},
			{reply{code: 550, text: "Mailbox disabled: user unknown"}, false},
			{reply{code: 550, enh: "5.7.1", text: "User unknown in relay recipient table"}, false},
		} {
			if got := provesNoCatchAll(c.r); got != c.want {
				t.Errorf("provesNoCatchAll(%d %s %q) = %v", c.r.code, c.r.enh, c.r.text, got)
			}
		}
	})
}

// A server answering 452 to a second RCPT in a transaction must not spoil
// the catch-all probe or the real answers: one RCPT per transaction.
func TestSecondRCPT452(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boxes := map[string]mailworld.Behaviour{}
		var addrs []string
		for i := range 40 {
			lp := fmt.Sprintf("user%02d", i)
			addrs = append(addrs, lp+"@r452.test")
			switch i % 4 {
			case 0, 1:
				boxes[lp] = mailworld.Exists
			case 2:
				boxes[lp] = mailworld.Full
			}
		}
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "r452.test", SecondRCPT452: true, Mailboxes: boxes})
		p := e.prober(func(c *Config) { c.MaxConnsPerHost = 1 })
		res := make([]Result, len(addrs))
		if err := p.ProbeBatch(ctxTimeout(t, 5*time.Second), "r452.test", e.mx("r452.test"), addrs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if strings.HasPrefix(r.Reply, "452") || truthOf(r.Outcome) != e.w.GroundTruth(addrs[i]) {
				t.Fatalf("%s: %v %q, truth %s", addrs[i], r.Outcome, r.Reply, e.w.GroundTruth(addrs[i]))
			}
		}
		// The first window's transaction (the first group, PipelineStart
		// RCPTs) met the limit after one RCPT (the others got 452 and went
		// again); from then on one RCPT a transaction, RSET between, at
		// most 10 RSETs a session (the non-mail budget of a server that
		// does not name itself). At most one catch-all probe: the missing
		// mailboxes' 5.1.1 settle it, unless the probe (queued first at the
		// first acceptance, as the call has a deadline) goes in the same
		// window as the first of them.
		hs, st := hostStats(e, "mx1.r452.test"), p.Stats()
		sent := len(addrs) + int(st.CatchAllProbes)
		if st.CatchAllProbes > 1 || hs.MAIL != sent || hs.RCPT != sent+p.Config().PipelineStart-1 || hs.RSET != hs.MAIL-hs.Total || hs.RSET > eximNonmail*hs.Total {
			t.Fatalf("stats %+v, %d probes: want transactions of one RCPT after the first, RSET between, at most %d a session", hs, st.CatchAllProbes, eximNonmail)
		}
	})
}

// Tarpits: Timeout (code 5) whether the prober's own GreetingTimeout runs
// out on every host while ctx is live (no host ever answered, Err says
// which) or ctx's deadline (or a cancellation) stops the probe first.
func TestTarpit(t *testing.T) {
	world := func(t *testing.T) *env {
		return startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "tarpit.test", Tarpit: true, MXHosts: 2},
			mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes},
		)
	}
	const step = 150 * time.Millisecond
	short := func(c *Config) { c.GreetingTimeout = step }
	t.Run("own budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			t0 := time.Now()
			r := e.prober(short).Probe(ctxTimeout(t, 5*time.Second), e.mx("tarpit.test"), "a@tarpit.test")
			took := time.Since(t0)
			if r.Outcome != Timeout || !errors.Is(r.Err, os.ErrDeadlineExceeded) || !errors.Is(r.Err, ErrAllHostsFailed) {
				t.Fatalf("got %v err %v", r.Outcome, r.Err)
			}
			if took != 2*step {
				t.Fatalf("took %v, want 2 x %v (two hosts)", took, step)
			}
		})
	})
	t.Run("ctx deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			p := e.prober(nil)
			t0 := time.Now()
			r := p.Probe(ctxTimeout(t, 200*time.Millisecond), e.mx("tarpit.test"), "a@tarpit.test")
			if r.Outcome != Timeout || r.Outcome.Code() != verify.CodeTimeout || !errors.Is(r.Err, context.DeadlineExceeded) {
				t.Fatalf("got %v err %v", r.Outcome, r.Err)
			}
			// Not cut, it would wait the 30s default greeting timeout.
			if took := time.Since(t0); took != 200*time.Millisecond {
				t.Fatalf("took %v: the deadline (200ms) did not cut the %v greeting timeout", took, p.Config().GreetingTimeout)
			}
		})
	})
	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			t0 := time.Now()
			res := make([]Result, 3)
			err := e.prober(nil).ProbeBatch(ctx, "tarpit.test", e.mx("tarpit.test"), []string{"a@tarpit.test", "b@tarpit.test", "c@tarpit.test"}, res)
			// Not cut, it would wait the 30s default greeting timeout.
			if !errors.Is(err, context.Canceled) || time.Since(t0) != 100*time.Millisecond {
				t.Fatalf("err %v after %v, want the cancellation at 100ms", err, time.Since(t0))
			}
			for _, r := range res {
				if r.Outcome != Timeout {
					t.Fatalf("got %+v", r)
				}
			}
		})
	})
	t.Run("next host", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			mx := append(slices.Clone(e.mx("tarpit.test")[:1]), e.mx("ok.test")...)
			r := e.prober(short).Probe(ctxTimeout(t, 5*time.Second), mx, "alice@ok.test")
			if r.Outcome != Deliverable || r.Host != "mx1.ok.test" {
				t.Fatalf("got %+v", r)
			}
		})
	})
}

// A host that drops the connection (or refuses it, or refuses the domain)
// makes the probe fall to the next one.
func TestFallbackToNextHost(t *testing.T) {
	world := func(t *testing.T) *env {
		return startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "drop.test", DropConnection: true},
			mailworld.Domain{Name: "droprcpt.test", DropAtRCPT: true},
			mailworld.Domain{Name: "pd.test", PrimaryDown: true},
			mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes},
			mailworld.Domain{Name: "other.test"},
		)
	}
	for _, bad := range []string{"drop.test", "droprcpt.test", "pd.test"} {
		t.Run(bad, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := world(t)
				mx := append(slices.Clone(e.mx(bad)[:1]), e.mx("ok.test")...)
				p := e.prober(nil)
				for _, tc := range []struct {
					addr string
					want Outcome
				}{{"alice@ok.test", Deliverable}, {"bob@ok.test", Full}} {
					r := p.Probe(ctxTimeout(t, 5*time.Second), mx, tc.addr)
					if r.Outcome != tc.want || r.Host != "mx1.ok.test" {
						t.Fatalf("%s via %s: %+v", tc.addr, bad, r)
					}
				}
			})
		})
	}
	// A server that does not take the domain: relay denied is a policy
	// rejection (code 420).
	t.Run("relay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			r := e.prober(nil).Probe(ctxTimeout(t, 5*time.Second), e.mx("other.test"), "alice@ok.test")
			if r.Outcome != Policy || !strings.Contains(r.Reply, "Relay access denied") {
				t.Fatalf("relay: %+v", r)
			}
		})
	})
}

func TestGreylistBatch(t *testing.T) {
	boxes := map[string]mailworld.Behaviour{}
	var addrs []string
	for i := range 30 {
		lp := fmt.Sprintf("u%d", i)
		addrs = append(addrs, lp+"@grey.test")
		if i%3 != 0 {
			boxes[lp] = mailworld.Exists
		}
	}
	world := func(t *testing.T) *env {
		return startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "grey.test", Greylist: 150 * time.Millisecond, Mailboxes: boxes},
			mailworld.Domain{Name: "greylong.test", Greylist: time.Hour, DefaultBehaviour: mailworld.CatchAll},
		)
	}
	t.Run("retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			p := e.prober(nil)
			res := make([]Result, len(addrs))
			if err := p.ProbeBatch(ctxTimeout(t, 5*time.Second), "grey.test", e.mx("grey.test"), addrs, res); err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if truthOf(r.Outcome) != e.w.UnderlyingTruth(addrs[i]) || r.Greylisted {
					t.Fatalf("%s: %+v", addrs[i], r)
				}
			}
			// Every address twice: 451, then the answer. The random one gets
			// its 451 too, and its retry, due with the others', goes along
			// with them (it would be dropped had a "user unknown" among them
			// come first): two sessions, the second at the retry.
			hs := hostStats(e, "mx1.grey.test")
			if hs.RCPT != 2*(len(addrs)+1) || hs.Total != 2 {
				t.Fatalf("stats %+v: want %d RCPTs in 2 sessions", hs, 2*(len(addrs)+1))
			}
			if st := p.Stats(); st.Deferred != uint64(len(addrs)+1) {
				t.Fatalf("deferred %d", st.Deferred)
			}
		})
	})
	t.Run("outlasts budget", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			la := []string{"a@greylong.test", "b@greylong.test", "c@greylong.test"}
			res := make([]Result, len(la))
			// Retries 400ms apart in a 1.2s budget: at 400ms and 800ms; one at
			// 1.2s would not fit, so the verdict comes at 800ms, before the
			// deadline.
			const budget = 1200 * time.Millisecond
			t0 := time.Now()
			p := e.prober(func(c *Config) { c.MaxGreylistRetries = 10; c.GreylistRetry = 400 * time.Millisecond })
			if err := p.ProbeBatch(ctxTimeout(t, budget), "greylong.test", e.mx("greylong.test"), la, res); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(t0); took != 800*time.Millisecond {
				t.Fatalf("took %v, want the verdict at the last retry that fits, 800ms", took)
			}
			for _, r := range res {
				if r.Outcome != Unconfirmed || !r.Greylisted || !strings.HasPrefix(r.Reply, "451") {
					t.Fatalf("got %+v", r)
				}
			}
			// Deferred and retried while the budget allowed.
			if hs := hostStats(e, "mx1.greylong.test"); hs.RCPT < 2*len(la) {
				t.Fatalf("RCPT %d: not retried", hs.RCPT)
			}
		})
	})
}

// One domain, 200 or 1,000 addresses: few sessions, 100 RCPTs a
// transaction. A second session beside the first only where it shortens
// the work: 200 RCPTs take the first session a few round trips once sampled,
// less than another's connect, greeting, EHLO and its share; 1,000 take
// it enough for two at once (MaxConnsPerHost).
func TestBatchFewSessions(t *testing.T) {
	for _, tc := range []struct{ n, atOnce int }{{200, 1}, {1000, 2}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) { batchFewSessions(t, tc.n, tc.atOnce) })
	}
}

func batchFewSessions(t *testing.T, n, atOnce int) {
	synctest.Test(t, func(t *testing.T) {
		boxes := map[string]mailworld.Behaviour{}
		var addrs []string
		kinds := []mailworld.Behaviour{mailworld.Exists, mailworld.Exists, mailworld.Missing, mailworld.Full, mailworld.Disabled}
		for i := range n {
			lp := fmt.Sprintf("person%04d", i)
			addrs = append(addrs, lp+"@big.test")
			if k := kinds[i%len(kinds)]; k != mailworld.Missing {
				boxes[lp] = k
			}
		}
		// The round trip keeps the first session's first transaction going
		// (greeting, EHLO, MAIL and its RCPTs: four of them) long after the
		// second session took its share of the queue, which it does before it
		// dials. Without it the first session's transaction would take no
		// time at all, and it could take the rest before the second one ran.
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "big.test", MXHosts: 2, Mailboxes: boxes, Latency: 40 * time.Millisecond})
		p := e.prober(nil)
		res := make([]Result, len(addrs))
		if err := p.ProbeBatch(ctxTimeout(t, 10*time.Second), "big.test", e.mx("big.test"), addrs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if truthOf(r.Outcome) != e.w.GroundTruth(addrs[i]) {
				t.Fatalf("%s: %+v, truth %s", addrs[i], r, e.w.GroundTruth(addrs[i]))
			}
		}
		st := e.w.Stats()
		hs := st.Hosts["mx1.big.test"]
		t.Logf("connections %d, RCPT %d, RSET %d, MAIL %d, max concurrent %d", st.Connections, st.RCPT, st.RSET, st.MAIL, hs.MaxConcurrent)
		// n RCPTs (no catch-all probe: the missing mailboxes' 5.1.1 settle
		// it): a session for each connection at once, transactions of at
		// most 100 RCPTs, RSET only between a session's transactions.
		if st.Connections != atOnce || st.Hosts["mx2.big.test"].Total != 0 {
			t.Fatalf("%d sessions", st.Connections)
		}
		if st.RCPT != len(addrs) || st.MAIL > n/100+1+st.Connections || st.RSET != st.MAIL-st.Connections || st.EHLO != st.Connections {
			t.Fatalf("stats %+v", st)
		}
		if hs.MaxConcurrent != atOnce {
			t.Fatalf("max concurrent %d, want %d", hs.MaxConcurrent, atOnce)
		}
		if st.MailFrom["verify@example.test"] != st.MAIL || st.EHLONames["verify.example.test"] != st.EHLO {
			t.Fatalf("envelope %v %v", st.MailFrom, st.EHLONames)
		}
	})
}

// Many concurrent batches and single probes on domains sharing a
// provider's MX hosts never exceed MaxConnsPerHost per host. The provider
// turns away connections beyond that number (421), as a tripwire. (Its
// round trip makes sessions last: with none, in simulated time each would
// end before the next could start, and the limit would never be met.)
func TestProviderConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perHost = 2
		var domains []mailworld.Domain
		var names []string
		for i := range 8 {
			name := fmt.Sprintf("d%d.test", i)
			names = append(names, name)
			boxes := map[string]mailworld.Behaviour{}
			for j := range 60 {
				if j%3 != 0 {
					boxes[fmt.Sprintf("u%d", j)] = mailworld.Exists
				}
			}
			d := mailworld.Domain{Name: name, Provider: "bigmail.test", MXHosts: 2, MaxConns: perHost, Mailboxes: boxes}
			if i%4 == 3 {
				d.DefaultBehaviour = mailworld.CatchAll
			}
			domains = append(domains, d)
		}
		e := startWorld(t, mailworld.Options{Latency: 10 * time.Millisecond}, domains...)
		p := e.prober(func(c *Config) { c.MaxConnsPerHost = perHost; c.MaxRcptPerSession = 20 })
		ctx := ctxTimeout(t, 15*time.Second)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []string
		check := func(addr string, r Result) {
			if truthOf(r.Outcome) != e.w.GroundTruth(addr) {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s: %v %q %v", addr, r.Outcome, r.Reply, r.Err))
				mu.Unlock()
			}
		}
		for _, name := range names {
			mx := e.mx(name)
			wg.Go(func() {
				var addrs []string
				for j := range 60 {
					addrs = append(addrs, fmt.Sprintf("u%d@%s", j, name))
				}
				res := make([]Result, len(addrs))
				if err := p.ProbeBatch(ctx, name, mx, addrs, res); err != nil {
					t.Error(err)
				}
				for i := range addrs {
					check(addrs[i], res[i])
				}
			})
			for j := range 4 {
				wg.Go(func() {
					addr := fmt.Sprintf("u%d@%s", 100+j, name)
					check(addr, p.Probe(ctx, mx, addr))
				})
			}
		}
		wg.Wait()
		if len(bad) > 0 {
			t.Fatalf("%d wrong, e.g. %v", len(bad), bad[:min(5, len(bad))])
		}
		st := e.w.Stats()
		hs := st.Hosts["mx1.bigmail.test"]
		t.Logf("mx1: %d connections, max concurrent %d, RCPT %d, RSET %d", hs.Total, hs.MaxConcurrent, hs.RCPT, hs.RSET)
		if hs.MaxConcurrent > perHost || st.Rejected != 0 {
			t.Fatalf("max concurrent %d (limit %d), rejected %d", hs.MaxConcurrent, perHost, st.Rejected)
		}
		if hs.MaxConcurrent != perHost {
			t.Fatalf("max concurrent %d: the limit was never reached", hs.MaxConcurrent)
		}
		if st.Hosts["mx2.bigmail.test"].Total != 0 {
			t.Fatal("secondary MX used while the primary works")
		}
	})
}

// RatePerHost spaces new connections to one host address, across calls.
// (One RCPT per session, or a single session would carry all six.)
func TestRatePerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var domains []mailworld.Domain
		for i := range 6 {
			domains = append(domains, mailworld.Domain{Name: fmt.Sprintf("r%d.test", i), Provider: "slowprov.test"})
		}
		e := startWorld(t, mailworld.Options{}, domains...)
		p := e.prober(func(c *Config) { c.MaxConnsPerHost = 1; c.RatePerHost = 20; c.MaxRcptPerSession = 1 })
		ctx := ctxTimeout(t, 5*time.Second)
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, d := range domains {
			mx := e.mx(d.Name)
			wg.Go(func() {
				if r := p.Probe(ctx, mx, "nobody@"+d.Name); r.Outcome != Missing {
					t.Errorf("%s: %+v", d.Name, r)
				}
			})
		}
		wg.Wait()
		took := time.Since(t0)
		// Six addresses and six catch-all probes, one a session: burst 1,
		// then 11 more at 20/s, the last at 550ms.
		if hs := hostStats(e, "mx1.slowprov.test"); hs.Total != 12 || took != 550*time.Millisecond {
			t.Fatalf("%d connections in %v, want 12 in 550ms", hs.Total, took)
		}

		// A token that cannot come before the caller's deadline: Timeout at
		// once, without connecting (a token every 5s and a 2s budget).
		slow := e.prober(func(c *Config) { c.MaxConnsPerHost = 1; c.RatePerHost = 0.2 })
		slow.Probe(ctx, e.mx("r0.test"), "nobody@r0.test") // takes the burst
		// and its session ends, holdIdle after its last verdict.
		simtime.Advance(holdIdle)
		slow.mu.Lock()
		for addr, q := range slow.hosts {
			if q.sessions != 0 {
				t.Errorf("%s: %d sessions open holdIdle after the last verdict", addr, q.sessions)
			}
		}
		slow.mu.Unlock()
		res := make([]Result, 2)
		t0 = time.Now()
		err := slow.ProbeBatch(ctxTimeout(t, 2*time.Second), "r1.test", e.mx("r1.test"), []string{"a@r1.test", "b@r1.test"}, res)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 0 {
			t.Fatalf("err %v after %v, want DeadlineExceeded at once", err, time.Since(t0))
		}
		for _, r := range res {
			if r.Outcome != Timeout || !errors.Is(r.Err, context.DeadlineExceeded) {
				t.Fatalf("got %+v", r)
			}
		}
		if hs := hostStats(e, "mx1.slowprov.test"); hs.Total != 13 {
			t.Fatalf("%d connections", hs.Total)
		}
	})
}

// The caller's deadline expiring in the middle of a batch: decided
// addresses keep their verdict, the others are Timeout, the error says so.
func TestBatchDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boxes := map[string]mailworld.Behaviour{}
		var addrs []string
		for i := range 300 {
			lp := fmt.Sprintf("u%d", i)
			boxes[lp] = mailworld.Exists
			addrs = append(addrs, lp+"@slow.test")
		}
		// 300 addresses at 8 a round trip of 50ms on one connection (about 2s):
		// longer than the budget, which leaves the first RCPTs and the
		// catch-all probe (about 5 round trips) room.
		const budget = 800 * time.Millisecond
		e := startWorld(t, mailworld.Options{Latency: 50 * time.Millisecond}, mailworld.Domain{Name: "slow.test", Mailboxes: boxes})
		p := e.prober(func(c *Config) { c.MaxConnsPerHost = 1; c.PipelineDepth = 8 })
		res := make([]Result, len(addrs))
		t0 := time.Now()
		err := p.ProbeBatch(ctxTimeout(t, budget), "slow.test", e.mx("slow.test"), addrs, res)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != budget {
			t.Fatalf("err %v after %v, want DeadlineExceeded at the %v deadline", err, time.Since(t0), budget)
		}
		n := map[Outcome]int{}
		for _, r := range res {
			n[r.Outcome]++
		}
		if n[Timeout] == 0 || n[Deliverable] == 0 || n[Timeout]+n[Deliverable] != len(addrs) {
			t.Fatalf("outcomes %v", n)
		}
	})
}

func TestBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes})
		p := e.prober(nil)
		ctx := ctxTimeout(t, 5*time.Second)
		for _, a := range []string{"alice@ok.test>\r\nDATA", "alice", "@ok.test", "alice@", "a<b@ok.test", "\x00@ok.test"} {
			if r := p.Probe(ctx, e.mx("ok.test"), a); r.Outcome != Unconfirmed || !errors.Is(r.Err, ErrBadAddress) {
				t.Fatalf("%q: %+v", a, r)
			}
		}
		if r := p.Probe(ctx, nil, "alice@ok.test"); r.Outcome != Unconfirmed || !errors.Is(r.Err, ErrNoHosts) {
			t.Fatalf("no MX: %+v", r)
		}
		if r := p.Probe(ctx, []mxdns.MXHost{{Host: "noaddr.ok.test", Pref: 10}}, "alice@ok.test"); !errors.Is(r.Err, ErrNoHosts) {
			t.Fatalf("MX without addresses: %+v", r)
		}
		if st := e.w.Stats(); st.Connections != 0 {
			t.Fatalf("%d connections for bad input", st.Connections)
		}
		if err := p.ProbeBatch(ctx, "ok.test", e.mx("ok.test"), []string{"a@ok.test"}, nil); err == nil {
			t.Fatal("short results accepted")
		}
		// Non-ASCII local part: SMTPUTF8 is offered, so it is sent with it.
		if r := p.Probe(ctx, e.mx("ok.test"), "jösé@ok.test"); r.Outcome != Missing {
			t.Fatalf("UTF-8 address: %+v", r)
		}
	})
}

func TestOutcomeCodes(t *testing.T) {
	want := map[Outcome]verify.Code{
		Deliverable: 50, CatchAll: 45, Missing: 400, Full: 410, Policy: 420, Unconfirmed: 20, Timeout: 5,
	}
	for o, c := range want {
		if o.Code() != c {
			t.Errorf("%v.Code() = %d, want %d", o, o.Code(), c)
		}
	}
	if Outcome(0) != Unconfirmed || Outcome(99).String() != "outcome(99)" || Deliverable.String() != "deliverable" {
		t.Fatal("names")
	}
}
