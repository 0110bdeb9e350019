package smtpprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/kits/memnet"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// fakeSMTP is a scripted SMTP server, on an in-memory network of its own,
// for behaviours the mail world does not have (HELO-only servers, refused
// senders, per-session limits, garbage). Empty replies from the hooks
// close the connection. Start it in the test's synctest bubble.
type fakeSMTP struct {
	t        testing.TB
	net      *memnet.Network
	ln       net.Listener
	greeting string
	greet    func(session int) string                 // the greeting of a session, if set ("": close without a byte)
	ehlo     []string                                 // reply lines to EHLO
	ehloFn   func(session int) []string               // reply lines to EHLO in a session, if set
	mail     func(session, n int) string              // reply to the n-th MAIL of a session (1-based)
	rcpt     func(session, n int, rcpt string) string // reply to the n-th RCPT of a session

	mu       sync.Mutex
	sessions int
	cmds     []string
	wg       sync.WaitGroup
}

// fakeAddr is where a fake server listens on its network.
const fakeAddr = "127.0.0.1:25"

// newFake starts a fake server, configured by setup before it serves.
func newFake(t testing.TB, setup func(f *fakeSMTP)) *fakeSMTP {
	n := memnet.New()
	ln, err := n.Listen("tcp4", fakeAddr)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSMTP{
		t: t, net: n, ln: ln, greeting: "220 fake ESMTP",
		ehlo: []string{"250-fake", "250-PIPELINING", "250 ENHANCEDSTATUSCODES"},
		mail: func(int, int) string { return "250 2.1.0 Ok" },
		rcpt: func(_, _ int, rcpt string) string {
			if testMailbox(rcpt) {
				return "250 2.1.5 Ok"
			}
			return "550 5.1.1 unknown"
		},
	}
	if setup != nil {
		setup(f)
	}
	t.Cleanup(func() {
		f.mu.Lock()
		f.ln.Close()
		f.mu.Unlock()
		f.wg.Wait()
	})
	t.Cleanup(settle)
	f.wg.Go(func() { f.accept(ln) })
	return f
}

func (f *fakeSMTP) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.sessions++
		n := f.sessions
		f.mu.Unlock()
		f.wg.Go(func() { f.serve(c, n) })
	}
}

// closeFor stops listening (connections are refused) for d, then listens
// on the same address again.
func (f *fakeSMTP) closeFor(d time.Duration) {
	f.mu.Lock()
	f.ln.Close()
	f.mu.Unlock()
	f.wg.Add(1)
	time.AfterFunc(d, func() {
		defer f.wg.Done()
		ln, err := f.net.Listen("tcp4", fakeAddr)
		if err != nil {
			f.t.Errorf("listening again on %s: %v", fakeAddr, err)
			return
		}
		f.mu.Lock()
		f.ln = ln
		f.mu.Unlock()
		f.wg.Go(func() { f.accept(ln) })
	})
}

func (f *fakeSMTP) serve(c net.Conn, session int) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	send := func(lines ...string) bool {
		if len(lines) == 0 || lines[0] == "" {
			return false
		}
		_, err := c.Write([]byte(strings.Join(lines, "\r\n") + "\r\n"))
		return err == nil
	}
	greeting := f.greeting
	if f.greet != nil {
		greeting = f.greet(session)
	}
	if !send(strings.Split(greeting, "\n")...) || !strings.HasPrefix(greeting, "220") {
		return
	}
	mails, rcpts := 0, 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		f.mu.Lock()
		f.cmds = append(f.cmds, line)
		f.mu.Unlock()
		verb, arg, _ := strings.Cut(line, " ")
		var ok bool
		switch strings.ToUpper(verb) {
		case "EHLO":
			if f.ehloFn != nil {
				ok = send(f.ehloFn(session)...)
			} else {
				ok = send(f.ehlo...)
			}
		case "HELO":
			ok = send("250 fake")
		case "MAIL":
			mails++
			ok = send(f.mail(session, mails))
		case "RCPT":
			rcpts++
			addr := strings.TrimSuffix(strings.TrimPrefix(arg, "TO:<"), ">")
			ok = send(f.rcpt(session, rcpts, addr))
		case "RSET":
			ok = send("250 2.0.0 Ok")
		case "QUIT":
			send("221 2.0.0 Bye")
			return
		case "DATA":
			f.t.Errorf("DATA sent")
			return
		default:
			ok = send("500 5.5.2 what?")
		}
		if !ok {
			return
		}
	}
}

func (f *fakeSMTP) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.cmds {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeSMTP) nSessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions
}

// fakeProber probes MX hosts fake1, fake2, ... (pretend addresses
// 127.0.0.101, ...) that the dialer maps to the given servers.
func fakeProber(t testing.TB, mod func(*Config), servers ...*fakeSMTP) (*Prober, []mxdns.MXHost) {
	route := map[string]*fakeSMTP{}
	var mx []mxdns.MXHost
	for i, f := range servers {
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(101 + i)})
		route[ip.String()+":25"] = f
		mx = append(mx, mxdns.MXHost{Host: fmt.Sprintf("fake%d", i+1), Pref: uint16(10 * (i + 1)), Addrs: []netip.Addr{ip}})
	}
	cfg := Config{
		HELOName: "verify.example.test", MailFrom: "verify@example.test",
		ConnectTimeout: 500 * time.Millisecond, CommandTimeout: time.Second,
		RatePerHost: 1000, GreylistRetry: 100 * time.Millisecond, MaxGreylistRetries: 2, RefusalBackoff: 10 * time.Millisecond,
		Dialer: guarded(t, func(ctx context.Context, network, addr string) (net.Conn, error) {
			f, ok := route[addr]
			if !ok {
				return nil, fmt.Errorf("no route to %s", addr)
			}
			return f.net.DialContext(ctx, network, fakeAddr)
		}),
	}
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg), mx
}

func TestFakeHELOOnlyNoPipelining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, func(f *fakeSMTP) {
			f.greeting = "220-fake.test ESMTP\n220-multi-line greeting\n220 ready"
			f.ehlo = []string{"502 5.5.1 EHLO not implemented"}
		})
		p, mx := fakeProber(t, nil, f)
		if r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test"); r.Outcome != Deliverable || r.Host != "fake1" {
			t.Fatalf("got %+v", r)
		}
		// The address and the catch-all probe in one transaction (the probe
		// goes first: it is queued at the front), then QUIT (after the
		// session waits holdIdle for more work). No RSET: one MAIL a
		// transaction, and this one was never full.
		simtime.Advance(holdIdle)
		f.mu.Lock()
		got := slices.Clone(f.cmds)
		f.mu.Unlock()
		want := []string{"EHLO verify.example.test", "HELO verify.example.test", "MAIL FROM:<verify@example.test>", "RCPT", "RCPT", "QUIT"}
		if len(got) != len(want) {
			t.Fatalf("commands %q", got)
		}
		rcpts := 0
		for i, w := range want {
			if !strings.HasPrefix(got[i], w) {
				t.Fatalf("commands %q, want %q", got, want)
			}
			if got[i] == "RCPT TO:<ok1@fake.test>" {
				rcpts++
			}
		}
		if rcpts != 1 {
			t.Fatalf("commands %q: ok1 asked %d times", got, rcpts)
		}
	})
}

// A host that answers every greeting with 421 is asked again after a
// backoff, MaxRefusals times, before its addresses move to the next MX
// host.
func TestFakeGreeting421FallsToNextHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := newFake(t, func(f *fakeSMTP) { f.greeting = "421 4.7.0 too busy" })
		ok := newFake(t, nil)
		p, mx := fakeProber(t, func(c *Config) { c.RefusalBackoff = 10 * time.Millisecond; c.MaxRefusals = 3 }, busy, ok)
		t0 := time.Now()
		if r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test"); r.Outcome != Deliverable || r.Host != "fake2" {
			t.Fatalf("got %+v", r)
		}
		// Backoffs of 5-10ms and 10-20ms (jittered) between the three
		// refusals, and nothing else takes time.
		if took := time.Since(t0); took < 15*time.Millisecond || took > 30*time.Millisecond {
			t.Fatalf("took %v: want the two backoffs between refusals, 15-30ms", took)
		}
		if st := p.Stats(); st.Refusals != 3 || st.HostFailures != 1 || st.Sessions != 1 || st.Dials != 4 || busy.nSessions() != 3 {
			t.Fatalf("stats %+v, %d connections to the busy host", st, busy.nSessions())
		}
	})
}

func TestFakeSenderRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, func(f *fakeSMTP) {
			f.mail = func(int, int) string { return "553 5.1.8 sender domain rejected" }
		})
		p, mx := fakeProber(t, nil, f)
		r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test")
		if r.Outcome != Unconfirmed || !errors.Is(r.Err, ErrAllHostsFailed) || !strings.HasPrefix(r.Reply, "553 5.1.8") {
			t.Fatalf("got %+v", r)
		}
		if f.count("RCPT") > 2 { // pipelined RCPTs (the address, the catch-all probe) are ignored
			t.Fatalf("RCPTs %d", f.count("RCPT"))
		}
	})
}

func TestFakeMailTempFailRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, func(f *fakeSMTP) {
			f.mail = func(session, _ int) string {
				if session == 1 {
					return "451 4.7.1 try later"
				}
				return "250 2.1.0 Ok"
			}
		})
		p, mx := fakeProber(t, nil, f)
		if r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "nobody@fake.test"); r.Outcome != Missing {
			t.Fatalf("got %+v", r)
		}
		// The retry needs a second session, after the backoff (a 4xx to
		// MAIL is the host asking to slow down); no catch-all probe: the
		// answer is a "user unknown".
		if n := f.nSessions(); n != 2 {
			t.Fatalf("%d sessions, want 2", n)
		}
	})
}

// A server limiting recipients per session (452 4.5.3 after 3) or dropping
// the connection after 3: the batch reconnects to the same host at once.
func TestFakePerSessionLimits(t *testing.T) {
	for _, mode := range []string{"452", "drop"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake(t, func(f *fakeSMTP) {
					f.rcpt = func(_, n int, rcpt string) string {
						if n > 3 {
							if mode == "drop" {
								return ""
							}
							return "452 4.5.3 too many recipients this session"
						}
						if testMailbox(rcpt) {
							return "250 2.1.5 Ok"
						}
						return "550 5.1.1 unknown"
					}
				})
				p, mx := fakeProber(t, func(c *Config) { c.MaxConnsPerHost = 1 }, f, newFake(t, nil))
				var addrs []string
				for i := range 10 {
					addrs = append(addrs, fmt.Sprintf("ok%d@fake.test", i), fmt.Sprintf("no%d@fake.test", i))
				}
				res := make([]Result, len(addrs))
				if err := p.ProbeBatch(ctxTimeout(t, 5*time.Second), "fake.test", mx, addrs, res); err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					want := Deliverable
					if i%2 == 1 {
						want = Missing
					}
					if r.Outcome != want || r.Host != "fake1" {
						t.Fatalf("%s: %+v", addrs[i], r)
					}
				}
				// 21 verdicts (the catch-all probe too) at 3 per session.
				if n := f.nSessions(); n != 7 {
					t.Fatalf("%d sessions, want 7", n)
				}
			})
		})
	}
}

func TestFakeGarbage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, func(f *fakeSMTP) { f.ehlo = []string{"hello there"} })
		p, mx := fakeProber(t, nil, f)
		r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test")
		if r.Outcome != Unconfirmed || !errors.Is(r.Err, errProtocol) {
			t.Fatalf("got %+v", r)
		}
	})
}

// testMailbox reports whether a fake server's mailbox exists: the tests'
// own addresses "ok@…", "ok1@…", "ok23@…". Not every local part starting
// with "ok": the catch-all probe's random local part does about 1 time
// in 1,300 (1/36 a letter), and a fake that accepted it turned a test's
// Deliverable into catchall (seen once in 12 runs of the engine's tests).
func testMailbox(rcpt string) bool {
	local, _, _ := strings.Cut(rcpt, "@")
	digits, ok := strings.CutPrefix(local, "ok")
	return ok && strings.Trim(digits, "0123456789") == ""
}
