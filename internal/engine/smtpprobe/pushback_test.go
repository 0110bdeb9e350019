package smtpprobe

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// fakeAddrs are n addresses at fake.test, ok0@, no1@, ok2@...: the fake
// server accepts the ok ones.
func fakeAddrs(n int) []string {
	var out []string
	for i := range n {
		if i%2 == 0 {
			out = append(out, fmt.Sprintf("ok%d@fake.test", i))
		} else {
			out = append(out, fmt.Sprintf("no%d@fake.test", i))
		}
	}
	return out
}

// requireFakeVerdicts probes addrs and requires every fake verdict from
// host fake1.
func requireFakeVerdicts(t *testing.T, p *Prober, mx []mxdns.MXHost, addrs []string, budget time.Duration) {
	t.Helper()
	res := make([]Result, len(addrs))
	if err := p.ProbeBatch(ctxTimeout(t, budget), "fake.test", mx, addrs, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := Deliverable
		if strings.HasPrefix(addrs[i], "no") {
			want = Missing
		}
		if r.Outcome != want || r.Host != "fake1" {
			t.Fatalf("%s: %+v, want %v from fake1", addrs[i], r, want)
		}
	}
}

// A host asking to slow down, in each way RFC 5321 and real servers do it,
// keeps its queue: every address gets its verdict from that host (no move
// to the next MX, nothing settled), after a backoff, and the host's
// sessions and connection rate are lowered.
func TestRefusalsKeepTheQueue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(f *fakeSMTP)
		refusals uint64
	}{
		{"421 greeting (anvil)", func(f *fakeSMTP) {
			f.greet = func(n int) string {
				if n <= 2 {
					return "421 4.7.0 fake1 Error: too many connections from 127.0.0.1"
				}
				return "220 fake ESMTP"
			}
		}, 2},
		{"450 greeting", func(f *fakeSMTP) {
			f.greet = func(n int) string {
				if n == 1 {
					return "450 4.3.2 Service currently unavailable"
				}
				return "220 fake ESMTP"
			}
		}, 1},
		{"421 to EHLO", func(f *fakeSMTP) {
			f.ehloFn = func(n int) []string {
				if n == 1 {
					return []string{"421 4.3.2 Shutting down"}
				}
				return []string{"250-fake", "250-PIPELINING", "250 ENHANCEDSTATUSCODES"}
			}
		}, 1},
		{"450 to MAIL (message rate)", func(f *fakeSMTP) {
			f.mail = func(session, _ int) string {
				if session == 1 {
					return "450 4.7.1 Error: too much mail from 127.0.0.1"
				}
				return "250 2.1.0 Ok"
			}
		}, 1},
		{"421 mid-transaction", func(f *fakeSMTP) {
			f.rcpt = func(session, n int, rcpt string) string {
				if session == 1 && n == 4 {
					return "421 4.4.2 fake Error: timeout exceeded"
				}
				if testMailbox(rcpt) {
					return "250 2.1.5 Ok"
				}
				return "550 5.1.1 unknown"
			}
		}, 1},
		{"closed without a byte after a session", func(f *fakeSMTP) {
			f.greet = func(n int) string {
				if n == 2 || n == 3 {
					return ""
				}
				return "220 fake ESMTP"
			}
			f.rcpt = func(session, n int, rcpt string) string {
				if session == 1 && n > 5 {
					return "452 4.5.3 too many recipients" // ends the first session early
				}
				if testMailbox(rcpt) {
					return "250 2.1.5 Ok"
				}
				return "550 5.1.1 unknown"
			}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(t, tc.setup)
				spare := newFake(t, nil)
				p, mx := fakeProber(t, func(c *Config) { c.RefusalBackoff = 20 * time.Millisecond }, f, spare)
				t0 := time.Now()
				requireFakeVerdicts(t, p, mx, fakeAddrs(20), 10*time.Second)
				st := p.Stats()
				if st.Refusals != tc.refusals || st.Stalled != 0 || st.HostFailures != 0 || spare.nSessions() != 0 {
					t.Fatalf("stats %+v, %d sessions at the next MX: want %d refusals, no stall, no failure, no fallback", st, spare.nSessions(), tc.refusals)
				}
				if took := time.Since(t0); took < 10*time.Millisecond {
					t.Fatalf("took %v: no backoff", took)
				}
				hs := p.cfg.HostMemory.Load(mx[0].Addrs[0].String() + ":25")
				if hs.Conns != 1 || hs.ConnRate <= 0 || hs.ConnRate > p.cfg.RatePerHost/2 || !hs.Answered {
					t.Fatalf("learnt %+v: want one session at a time and at most half the rate", hs)
				}
				if p.penalties.len() != 0 {
					t.Fatal("a busy host was penalised as dead")
				}
			})
		})
	}
}

// Connections refused after a session at the host are a busy host, not a
// dead one: the queue waits (no penalty, no move to the next MX); refused
// on first contact, the host is skipped as before (TestHostPenaltyPrimaryDown).
// One session at a time, and the host stops listening before it answers the
// limit: a second session let in at that moment would make the refusal a
// window of the host's (two connections in it: see TestAnvilMidList), too
// long for the call's deadline (1 run in 50 before).
func TestRefusedAfterSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var closing sync.Once
		var f *fakeSMTP
		f = newFake(t, func(f0 *fakeSMTP) {
			f0.rcpt = func(session, n int, rcpt string) string {
				if session == 1 && n > 5 {
					// The first session meets a limit; the host then refuses
					// connections for a while.
					closing.Do(func() { f.closeFor(300 * time.Millisecond) })
					return "452 4.5.3 too many recipients"
				}
				if testMailbox(rcpt) {
					return "250 2.1.5 Ok"
				}
				return "550 5.1.1 unknown"
			}
		})
		spare := newFake(t, nil)
		p, mx := fakeProber(t, func(c *Config) { c.RefusalBackoff = 50 * time.Millisecond; c.MaxConnsPerHost = 1 }, f, spare)
		requireFakeVerdicts(t, p, mx, fakeAddrs(20), 10*time.Second)
		if st := p.Stats(); st.Refusals == 0 || st.Stalled != 0 || st.HostFailures != 0 || spare.nSessions() != 0 || p.penalties.len() != 0 {
			t.Fatalf("stats %+v, %d sessions at the next MX, %d penalties: want refusals waited out", st, spare.nSessions(), p.penalties.len())
		}
	})
}

// A host that keeps refusing past the caller's deadline: the addresses are
// Unconfirmed (it answered), with the refusal as their reply, settled as
// soon as the next try could not fit, before the deadline (ProbeBatch's
// nil error says the context did not end first).
func TestRefusalPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const refusal = "421 4.7.0 fake1 Error: too many connections from 127.0.0.1"
		f := newFake(t, func(f *fakeSMTP) { f.greeting = refusal })
		p, mx := fakeProber(t, func(c *Config) { c.RefusalBackoff = 200 * time.Millisecond }, f)
		addrs := fakeAddrs(5)
		res := make([]Result, len(addrs))
		if err := p.ProbeBatch(ctxTimeout(t, 2*time.Second), "fake.test", mx, addrs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			var rf *refusalError
			if r.Outcome != Unconfirmed || r.Reply != refusal || !errors.As(r.Err, &rf) {
				t.Fatalf("%s: %+v", addrs[i], r)
			}
		}
		if n := f.nSessions(); n < 2 {
			t.Fatalf("%d connections: not retried within the deadline", n)
		}
	})
}

// Postfix's anvil on a host whose limit is met mid-list: a list needing
// many sessions (the error budget ends each after 9 rejections) meets the
// connection rate limit; the 421 greeting is waited out until the host's
// window ends, and from then on the host gets as many connections a window
// as it accepted. A session that has spent its budget when no connection
// can be had before the next window goes on into Postfix's slow zone (up
// to 18 rejections, short of its hard limit) instead of waiting idle:
// every verdict right, no address lost, one refusal, no session hung up
// on, never more sessions at once than allowed.
func TestAnvilMidList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 2 * time.Second // the first window's three sessions take well under it
		boxes, addrs := halfMissing("anvil.test", 100)
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "anvil.test", Mailboxes: boxes,
			SoftErrors: 10, HardErrors: 20, ErrorSleep: 20 * time.Millisecond, ConnRateLimit: 3, ConnRateWindow: window})
		p := e.prober(func(c *Config) { c.RefusalBackoff = 100 * time.Millisecond; c.RefusalWindow = window })
		t0 := time.Now()
		probeHalfMissing(t, e, p, "anvil.test", addrs)
		if took := time.Since(t0); took < window {
			t.Fatalf("took %v: the host's window was not waited out", took)
		}
		hs := hostStats(e, "mx1.anvil.test")
		st := p.Stats()
		// 51 rejections (50 missing, the catch-all probe): 3 sessions in the
		// first window and a refusal; while another session was open it may
		// be a limit of concurrent sessions (one at a time from then on), and
		// the next, with none open, shows the window (a third may come from a
		// session that was dialling meanwhile); then the rest in the next
		// window, which has room for them (so no session needs the slow zone:
		// see TestSlowZone).
		if hs.Rejected < 1 || hs.Rejected > 3 || st.Refusals != uint64(hs.Rejected) || hs.TooManyErrors != 0 || hs.MaxConcurrent > 2 {
			t.Fatalf("host %+v, prober %+v, learnt %+v: want the limit met once, waited out, then 2 sessions into the slow zone, none hung up on", hs, st, p.cfg.HostMemory.Load(e.w.MXAddrs("anvil.test")[0]))
		}
		learnt := p.cfg.HostMemory.Load(e.w.MXAddrs("anvil.test")[0])
		// Exactly what the host takes: its window's three (in simulated time
		// none of them can fall out of the last RefusalWindow before the
		// refusal comes, as on a slow machine's clock).
		if learnt.ConnsPerWindow != 3 || learnt.Conns > 1 {
			t.Fatalf("learnt %+v, want 3 connections a window", learnt)
		}
	})
}

// A tarpit that never sends a byte is "no answer" (Timeout, code 5)
// however the connection ends: hung up before the greeting timeout, at
// it, or held past it.
func TestTarpitHangup(t *testing.T) {
	const greet = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		hangup time.Duration
	}{
		{"hangs up before", greet / 3},
		{"hangs up at the timeout", greet},
		{"hangs up after", 3 * greet},
		{"holds on", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := startWorld(t, mailworld.Options{IdleTimeout: 10 * time.Second},
					mailworld.Domain{Name: "pit.test", Tarpit: true, TarpitHangup: tc.hangup, MXHosts: 2})
				p := e.prober(func(c *Config) { c.GreetingTimeout = greet })
				res := make([]Result, 3)
				addrs := []string{"a@pit.test", "b@pit.test", "c@pit.test"}
				if err := p.ProbeBatch(ctxTimeout(t, 5*time.Second), "pit.test", e.mx("pit.test"), addrs, res); err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					if r.Outcome != Timeout || r.Outcome.Code() != 5 || !errors.Is(r.Err, ErrAllHostsFailed) {
						t.Fatalf("%s: %+v, want Timeout (code 5)", addrs[i], r)
					}
				}
				if st := p.Stats(); st.Stalled != 2 || st.Refusals != 0 {
					t.Fatalf("stats %+v: want both hosts stalled, no refusal", st)
				}
				// Remembered: a later call skips both hosts at once. The
				// counters and the bubble's clock say so.
				before, start := p.Stats(), time.Now()
				if r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("pit.test"), "d@pit.test"); r.Outcome != Timeout || !errors.Is(r.Err, ErrHostSkipped) || time.Since(start) != 0 {
					t.Fatalf("later call: %+v after %v", r, time.Since(start))
				}
				if st := p.Stats(); st.Dials != before.Dials || st.HostsSkipped != before.HostsSkipped+2 {
					t.Fatalf("later call: %d dials, %d hosts skipped; want none and both", st.Dials-before.Dials, st.HostsSkipped-before.HostsSkipped)
				}
			})
		})
	}
}

// A host that takes two connections at a time (anvil's concurrency limit,
// the same "421 too many connections" as its rate limit) refuses our third
// session while the other two are open: that is a limit of sessions at
// once, not a window to wait out, though it had accepted two connections
// in the last minute. The host gets two sessions at a time and the list
// goes on at once. (1,000 addresses: a backlog a third session shortens;
// 300 are sent by two sooner than a third could help.)
func TestConcurrencyLimit421(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boxes, addrs := mixedBoxes("two.test", 1000)
		e := startWorld(t, mailworld.Options{Latency: 2 * time.Millisecond}, mailworld.Domain{Name: "two.test", Mailboxes: boxes, MaxConns: 2})
		p := e.prober(func(c *Config) { c.RefusalBackoff = 20 * time.Millisecond; c.MaxConnsPerHost = 3 })
		t0 := time.Now()
		requireTruth(t, e, p, "two.test", addrs)
		hs := hostStats(e, "mx1.two.test")
		learnt := p.cfg.HostMemory.Load(e.w.MXAddrs("two.test")[0])
		if hs.Rejected == 0 || learnt.Conns != 2 || learnt.ConnsPerWindow != 0 {
			t.Fatalf("host %+v, learnt %+v: want the third session refused and two at a time from then on", hs, learnt)
		}
		if took := time.Since(t0); took > 10*time.Second {
			t.Fatalf("took %v: the refusal was waited out as a window", took)
		}
	})
}

// When a session to a Postfix host that counts connections in windows may
// go on into the slow zone: only with its budget spent, work left and no
// connection to be had before the next window.
func TestSlowZone(t *testing.T) {
	for _, tc := range []struct {
		name                string
		postfix             bool
		perWindow, winCount int
		rejects, queued     int
		waiting, want       bool
	}{
		{"window spent", true, 3, 3, 9, 5, false, true},
		{"waiting for the next window", true, 3, 0, 9, 5, true, true},
		{"a connection can be had", true, 3, 1, 9, 5, false, false},
		{"budget not spent", true, 3, 3, 5, 5, false, false},
		{"no work left", true, 3, 3, 9, 0, false, false},
		{"not Postfix", false, 3, 3, 9, 5, false, false},
		{"no window limit", true, 0, 0, 9, 5, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{})
			p.mu.Lock()
			defer p.mu.Unlock()
			q := p.host("127.0.0.1:25")
			q.hs.ConnsPerWindow, q.winCount, q.winStart, q.n = tc.perWindow, tc.winCount, time.Now(), tc.queued
			if tc.waiting {
				q.backoffUntil = time.Now().Add(time.Minute)
			}
			s := &session{p: p, rules: rulesFor(otherServer), rejects: tc.rejects}
			if tc.postfix {
				s.rules, s.rejectCap = rulesFor(postfixServer), p.cfg.MaxRejectsPerSession
			}
			got := p.slowZoneLocked(q, s)
			if got != tc.want || (got && (s.rejectCap != postfixSlowZoneRejects || s.rules.watchSlow)) {
				t.Fatalf("slow zone %v (cap %d, watch %v), want %v", got, s.rejectCap, s.rules.watchSlow, tc.want)
			}
		})
	}
}

// What a refused connection teaches: with other connections of ours open
// (when it was dialled or when its refusal is read) it may be a limit of
// sessions at once (fewer sessions, half the rate); with none open, after
// two or more accepted connections in the last window, a limit a window
// (anvil's rate limit), and so with fewer open than the host took at once
// before; a refusal mid-session is neither.
func TestLowerAfterRefusal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		conns     int // our other connections to the host when the refusal is read
		beside    int // ours open when the refused one was dialled
		peak      int // the most sessions at once the host accepted
		accepted  int // connections accepted in the last window
		atConnect bool
		want      HostState
	}{
		{"others open", 2, 0, 2, 5, true, HostState{Conns: 2, ConnRate: 2.5}},
		{"none open, a window", 0, 0, 1, 5, true, HostState{ConnsPerWindow: 5}},
		{"none open, too few to tell", 0, 0, 1, 1, true, HostState{Conns: 1, ConnRate: 2.5}},
		// A busy machine read the refusal after the connection beside it
		// closed: the host had one of ours open when it refused.
		{"one open at the dial, closed since", 0, 1, 1, 5, true, HostState{Conns: 1, ConnRate: 2.5}},
		{"fewer open than it took at once", 1, 1, 3, 5, true, HostState{ConnsPerWindow: 5}},
		{"mid-session", 0, 0, 1, 5, false, HostState{Conns: 1, ConnRate: 2.5}},
		// Sessions sleeping through its errors were open beside it, more
		// than MaxConnsPerHost (2; MaxSleepingConnsPerHost 5): the host
		// took 4 at once.
		{"four sleeping beside", 4, 4, 4, 5, true, HostState{Conns: 4, ConnRate: 2.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{MaxSleepingConnsPerHost: 5})
			p.mu.Lock()
			defer p.mu.Unlock()
			q := p.host("127.0.0.1:25")
			q.conns, q.peakOpen = tc.conns, tc.peak
			now := time.Now()
			for i := range tc.accepted {
				q.accepted = append(q.accepted, now.Add(-time.Duration(i+1)*time.Second))
			}
			p.lowerLocked(q, now, tc.atConnect, tc.beside)
			if q.hs != tc.want {
				t.Fatalf("learnt %+v, want %+v", q.hs, tc.want)
			}
			if tc.want.ConnsPerWindow > 0 && q.backoffUntil.Before(now.Add(p.cfg.RefusalWindow-10*time.Second)) {
				t.Fatalf("backoff until %v: the window (from %v) is not waited out", q.backoffUntil.Sub(now), -time.Duration(tc.accepted)*time.Second)
			}
		})
	}
}
