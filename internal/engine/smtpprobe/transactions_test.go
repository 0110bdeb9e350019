package smtpprobe

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// mixedBoxes makes n addresses at domain cycling through every mailbox
// kind, and the mailboxes to declare.
func mixedBoxes(domain string, n int) (map[string]mailworld.Behaviour, []string) {
	kinds := []mailworld.Behaviour{mailworld.Exists, mailworld.Missing, mailworld.Exists, mailworld.Full, mailworld.Disabled, mailworld.Exists}
	boxes := map[string]mailworld.Behaviour{}
	var addrs []string
	for i := range n {
		local := fmt.Sprintf("u%03d", i)
		if k := kinds[i%len(kinds)]; k != mailworld.Missing {
			boxes[local] = k
		}
		addrs = append(addrs, local+"@"+domain)
	}
	return boxes, addrs
}

// requireTruth probes addrs in one batch and requires every verdict to be
// the world's ground truth.
func requireTruth(t *testing.T, e *env, p *Prober, domain string, addrs []string) []Result {
	t.Helper()
	res := make([]Result, len(addrs))
	if err := p.ProbeBatch(ctxTimeout(t, 30*time.Second), domain, e.mx(domain), addrs, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if truthOf(r.Outcome) != e.w.GroundTruth(addrs[i]) {
			t.Fatalf("%s: %v %q %v, truth %s", addrs[i], r.Outcome, r.Reply, r.Err, e.w.GroundTruth(addrs[i]))
		}
	}
	return res
}

// Many recipients a transaction, each verdict exact: a host that takes 7
// RCPTs a transaction (Postfix's smtpd_recipient_limit) and pauses before
// opening each queue file (in_flow_delay). The RCPTs over its limit get
// 452 and go again in the next transaction; the flow delay is paid once a
// transaction with an accepted address, not once an address.
func TestTransactionsCarryManyRcpts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const flow = 100 * time.Millisecond
		boxes, addrs := mixedBoxes("pf.test", 60)
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "pf.test", Mailboxes: boxes,
			TxRcptLimit: 7, InFlowDelay: flow, SoftErrors: 10, HardErrors: 20, ErrorSleep: time.Second})
		p := e.prober(func(c *Config) { c.MaxConnsPerHost = 1 })
		res := requireTruth(t, e, p, "pf.test", addrs)
		for _, r := range res {
			if strings.HasPrefix(r.Reply, "452") {
				t.Fatalf("a 452 became a verdict: %+v", r)
			}
		}
		hs := hostStats(e, "mx1.pf.test")
		accepted := 0
		for _, a := range addrs {
			if e.w.GroundTruth(a) == mailworld.TruthDeliverable {
				accepted++
			}
		}
		// 61 RCPTs with answers (the catch-all probe too) at most 7 a
		// transaction: at least 9 transactions; the Postfix budget (9
		// rejections a session, 30 rejections in all) needs 4 sessions.
		if hs.MAIL < 9 || hs.MAIL > 9+2*hs.Total || hs.FlowDelays > hs.MAIL || hs.FlowDelays >= accepted/2 {
			t.Fatalf("host %+v: want about one MAIL per 7 RCPTs and a flow delay a transaction (%d accepted addresses)", hs, accepted)
		}
		if hs.Slowed != 0 || hs.TooManyErrors != 0 {
			t.Fatalf("host %+v: the error budget was overrun", hs)
		}
		if learnt := p.cfg.HostMemory.Load(e.w.MXAddrs("pf.test")[0]); learnt.RcptsPerTransaction != 7 || learnt.RcptsPerSession != 0 {
			t.Fatalf("learnt %+v: want 7 RCPTs a transaction, no limit a session", learnt)
		}
	})
}

// Exim's smtp_accept_max_nonmail (10) is never met, even where each
// transaction takes one RCPT and so every RCPT needs an RSET; a server
// that hides its name and drops at fewer teaches its own budget.
func TestEximNonmailLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int
		banner string
		drops  int
	}{
		{"Exim's default", 10, "", 0},
		{"hidden, lower", 4, "ESMTP", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				boxes, addrs := mixedBoxes("exim.test", 40)
				e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "exim.test", Mailboxes: boxes,
					TxRcptLimit: 1, NonmailLimit: tc.limit, Banner: tc.banner})
				p := e.prober(func(c *Config) { c.MaxConnsPerHost = 1 })
				requireTruth(t, e, p, "exim.test", addrs)
				hs := hostStats(e, "mx1.exim.test")
				if hs.NonmailDrops != tc.drops {
					t.Fatalf("host %+v: %d sessions dropped for non-mail commands, want %d", hs, hs.NonmailDrops, tc.drops)
				}
				// One free RSET, then at most the limit, a session.
				if hs.RSET > (tc.limit+1)*hs.Total || hs.MAIL < len(addrs) {
					t.Fatalf("host %+v", hs)
				}
			})
		})
	}
}

// Pauses that are not an error budget do not end a session: Postfix's flow
// control before the first accepted RCPT of a transaction (even on a
// server that hides its name, after several rejections), and Exchange's
// tarpit before every rejection.
func TestPausesThatAreNotABudget(t *testing.T) {
	const pause = time.Second // beyond slowReplyGap
	for _, tc := range []struct {
		name     string
		greeting string
		delay    func(accepted, firstInTx bool) bool
	}{
		{"flow control", "220 fake ESMTP", func(accepted, first bool) bool { return accepted && first }},
		{"Exchange tarpit", "220 fake.test Microsoft ESMTP MAIL Service ready at Mon, 1 Jan 2026 00:00:00 +0000",
			func(accepted, _ bool) bool { return !accepted }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				opened := map[int]bool{} // session → a transaction's first RCPT accepted
				f := newFake(t, func(f *fakeSMTP) {
					f.greeting = tc.greeting
					f.mail = func(session, _ int) string {
						mu.Lock()
						opened[session] = false
						mu.Unlock()
						return "250 2.1.0 Ok"
					}
					f.rcpt = func(session, _ int, rcpt string) string {
						accepted := testMailbox(rcpt)
						mu.Lock()
						first := accepted && !opened[session]
						if accepted {
							opened[session] = true
						}
						mu.Unlock()
						if tc.delay(accepted, first) {
							<-time.After(pause) // the server's pause, on the bubble's clock
						}
						if accepted {
							return "250 2.1.5 Ok"
						}
						return "550 5.1.1 unknown"
					}
				})
				p, mx := fakeProber(t, func(c *Config) { c.CommandTimeout = 5 * time.Second }, f)
				// Four rejections first, then an accepted address, then more.
				addrs := []string{"no1@fake.test", "no2@fake.test", "no3@fake.test", "no4@fake.test", "ok5@fake.test", "no6@fake.test", "ok7@fake.test"}
				requireFakeVerdicts(t, p, mx, addrs, 30*time.Second)
				if n, learnt := f.nSessions(), p.cfg.HostMemory.Load(mx[0].Addrs[0].String()+":25"); n != 1 || learnt.RejectsPerSession != 0 {
					t.Fatalf("%d sessions, learnt %+v: a pause was taken for an error budget", n, learnt)
				}
			})
		})
	}
}

// A host with thousands of a list's recipients (a provider's MX host)
// that does not name itself gets Exim's non-mail budget (10 RSETs, 11
// transactions a session): its backlog goes in one session of bigger
// transactions rather than a new connection every 1,100 RCPTs. A host
// that limits transactions to RFC 5321's 100 answers 452 to the RCPTs a
// window took past it, once: its limit is learnt, and the stretching ends.
func TestBacklogStretchesTransactions(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		txLimit              int
		sessions, mails, tms int
	}{
		// 2,400 RCPTs in 11 transactions of at most 219.
		{"no limit", 0, 1, 11, 0},
		// The first transaction probes 10 past 100 and learns the limit
		// (its 10 RCPTs past it answered 452 and sent again); after the
		// 452 a one-RCPT transaction tells it from a limit a session;
		// then 100 a transaction, 11 transactions a session: 2,410 RCPTs
		// need 3 sessions.
		{"100 a transaction", 100, 3, 24, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				boxes, addrs := mixedBoxes("big.test", 2400)
				e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "big.test", Mailboxes: boxes, TxRcptLimit: tc.txLimit})
				p := e.prober(func(c *Config) { c.MaxConnsPerHost = 1 })
				requireTruth(t, e, p, "big.test", addrs)
				hs := hostStats(e, "mx1.big.test")
				// RCPTs: every address once, and again those answered 452.
				if hs.Total != tc.sessions || hs.MAIL != tc.mails || hs.RCPT != len(addrs)+tc.tms || hs.NonmailDrops != 0 || hs.RSET > 10*hs.Total {
					t.Fatalf("host %+v: want %d sessions, %d transactions, %d RCPTs answered 452, no drop", hs, tc.sessions, tc.mails, tc.tms)
				}
				if learnt := p.cfg.HostMemory.Load(e.w.MXAddrs("big.test")[0]); learnt.RcptsPerTransaction != tc.txLimit {
					t.Fatalf("learnt %+v, want %d RCPTs a transaction", learnt, tc.txLimit)
				}
			})
		})
	}
}
