package smtpprobe

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/proxypool"
	"github.com/emaildata/emaildata/internal/engine/proxypool/socks5test"
	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// socksServer is a SOCKS5 proxy on the world's network.
func socksServer(t *testing.T, e *env) *socks5test.Server {
	t.Helper()
	ln, err := e.n.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := socks5test.Serve(ln, e.dial, "probe", "pw")
	t.Cleanup(s.Close)
	return s
}

func proxyDialer(t *testing.T, e *env, servers ...*socks5test.Server) *proxypool.Pool {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, "socks5://probe:pw@"+s.Addr())
	}
	pool, err := proxypool.New(proxypool.Config{URLs: urls, Forward: e.dial, Backoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// The SMTP conversation goes through the SOCKS5 proxy, and the address
// guard applies to the final destination: a refused MX host is never
// asked of the proxy.
func TestProxySMTP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes, MXHosts: 2})
		mxa := e.w.MXAddrs("ok.test")
		denied := netip.MustParseAddrPort(mxa[0]).Addr()
		px := socksServer(t, e)
		pool := proxyDialer(t, e, px)
		p := e.prober(func(c *Config) {
			c.Dialer = pool.Dial
			c.AllowAddr = func(a netip.Addr) error {
				if a == denied {
					return errors.New("not a public address")
				}
				return nil
			}
		})
		for _, tc := range []struct {
			addr string
			want Outcome
		}{{"alice@ok.test", Deliverable}, {"bob@ok.test", Full}, {"nobody@ok.test", Missing}} {
			if r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("ok.test"), tc.addr); r.Outcome != tc.want || r.Host != "mx2.ok.test" {
				t.Fatalf("%s: %+v", tc.addr, r)
			}
		}
		targets := px.Targets()
		if len(targets) == 0 || slices.Contains(targets, mxa[0]) || targets[0] != mxa[1] {
			t.Fatalf("proxy relayed %v; want only %s (never the guarded %s)", targets, mxa[1], mxa[0])
		}
		if hs := hostStats(e, "mx2.ok.test"); hs.Total != len(targets) || hs.RCPT == 0 {
			t.Fatalf("mx2 saw %d connections, the proxy relayed %d", hs.Total, len(targets))
		}
		if hs := hostStats(e, "mx1.ok.test"); hs.Total != 0 {
			t.Fatalf("the guarded host saw %d connections", hs.Total)
		}
	})
}

// A proxy that dies mid-session fails over: the addresses it carried are
// retried through the other proxy, and none is lost or blamed on the host.
func TestProxyDiesMidSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boxes := map[string]mailworld.Behaviour{}
		var addrs []string
		for i := range 60 {
			lp := fmt.Sprintf("u%d", i)
			addrs = append(addrs, lp+"@slow.test")
			if i%3 != 0 {
				boxes[lp] = mailworld.Exists
			}
		}
		e := startWorld(t, mailworld.Options{Latency: 20 * time.Millisecond}, mailworld.Domain{Name: "slow.test", Mailboxes: boxes})
		a, b := socksServer(t, e), socksServer(t, e)
		pool := proxyDialer(t, e, a, b)
		p := e.prober(func(c *Config) { c.Dialer = pool.Dial; c.MaxConnsPerHost = 1; c.PipelineDepth = 2 })
		res := make([]Result, len(addrs))
		pd, err := p.Start(ctxTimeout(t, 10*time.Second), "slow.test", e.mx("slow.test"), addrs, res)
		if err != nil {
			t.Fatal(err)
		}
		// Kill whichever proxy carries the session, once it is under way.
		for p.Stats().RCPT < 10 {
			simtime.Advance(time.Millisecond)
		}
		first, second := a, b
		if b.Accepted() > 0 {
			first, second = b, a
		}
		first.Kill()
		if err := pd.Wait(); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if truthOf(r.Outcome) != e.w.GroundTruth(addrs[i]) {
				t.Fatalf("%s: %+v", addrs[i], r)
			}
		}
		st := p.Stats()
		if st.ProxyFailovers == 0 || second.Accepted() == 0 || st.HostFailures != 0 {
			t.Fatalf("stats %+v, second proxy accepted %d", st, second.Accepted())
		}
		if ps := pool.Stats(); ps.Down != 1 {
			t.Fatalf("pool %+v", ps)
		}
	})
}

// With every proxy down, addresses wait and retry, then end Unconfirmed
// saying why; the MX host is not blamed.
func TestNoProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes})
		px := socksServer(t, e)
		pool := proxyDialer(t, e, px)
		px.Close()
		p := e.prober(func(c *Config) { c.Dialer = pool.Dial })
		r := p.Probe(ctxTimeout(t, 500*time.Millisecond), e.mx("ok.test"), "alice@ok.test")
		if r.Outcome != Timeout || p.penalties.len() != 0 || p.Stats().HostFailures != 0 {
			t.Fatalf("got %+v, stats %+v", r, p.Stats())
		}
	})
}

// With a route picked per session, each proxy is an egress of its own:
// a host gets MaxConnsPerHost sessions through each proxy, never more
// (without PickRoute, all the proxies share one budget).
func TestProxyRoutesCountPerProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{Latency: 5 * time.Millisecond},
			mailworld.Domain{Name: "one.test"}, mailworld.Domain{Name: "two.test"})
		pool := proxyDialer(t, e, socksServer(t, e), socksServer(t, e))
		shared := e.prober(func(c *Config) { c.Dialer, c.MaxConnsPerHost, c.MaxRcptPerSession = pool.Dial, 1, 4 })
		probeAll(t, e, "one.test", 200, Missing, shared)
		perProxy := e.prober(func(c *Config) {
			c.Dialer, c.MaxConnsPerHost, c.MaxRcptPerSession, c.Routes = pool.Dial, 1, 4, 2
			c.PickRoute = func(prefer func(string) bool) (string, DialFunc, error) {
				r, err := pool.PickFor(prefer)
				if err != nil {
					return "", nil, err
				}
				return r.Name(), r.Dial, nil
			}
		})
		probeAll(t, e, "two.test", 200, Missing, perProxy)
		one, two := hostStats(e, "mx1.one.test"), hostStats(e, "mx1.two.test")
		if one.MaxConcurrent != 1 || two.MaxConcurrent != 2 {
			t.Fatalf("sessions at once: %d with one budget for both proxies (want 1), %d with one per proxy (want 2)", one.MaxConcurrent, two.MaxConcurrent)
		}
	})
}

// A picked proxy that is down is set aside and the work goes out through
// the other: the mail host is not blamed.
func TestProxyRouteFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes})
		down := socksServer(t, e)
		pool := proxyDialer(t, e, down, socksServer(t, e))
		down.Close()
		p := e.prober(func(c *Config) {
			c.Dialer, c.Routes = pool.Dial, 2
			c.PickRoute = func(prefer func(string) bool) (string, DialFunc, error) {
				r, err := pool.PickFor(prefer)
				if err != nil {
					return "", nil, err
				}
				return r.Name(), r.Dial, nil
			}
		})
		ctx := ctxTimeout(t, 10*time.Second)
		for range 4 {
			if r := p.Probe(ctx, e.mx("ok.test"), "alice@ok.test"); r.Outcome != Deliverable {
				t.Fatalf("%v %q %v", r.Outcome, r.Reply, r.Err)
			}
			simtime.Advance(holdIdle) // the session ends: a new session, a new pick
		}
		if st := pool.Stats(); st.Down != 1 {
			t.Fatalf("pool %+v: want the dead proxy set aside", st)
		}
	})
}
