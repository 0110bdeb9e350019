package proxypool

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/engine/proxypool/socks5test"
	"github.com/emaildata/emaildata/internal/kits/memnet"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// The tests run in synctest bubbles, their proxies and destinations on an
// in-memory network (memnet) that the pool reaches through Forward.

// echoServer answers every connection with "hi\n" and then echoes.
func echoServer(t *testing.T, n *memnet.Network) string {
	t.Helper()
	return serve(t, n, "127.0.0.1:0", func(c net.Conn) {
		c.Write([]byte("hi\n"))
		io.Copy(c, c)
	})
}

// serve listens on addr of n and runs handle on every connection, each
// closed after; it returns the address listened on.
func serve(t *testing.T, n *memnet.Network, addr string, handle func(net.Conn)) string {
	t.Helper()
	ln, err := n.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	return ln.Addr().String()
}

func proxyServer(t *testing.T, n *memnet.Network, user, pw string) *socks5test.Server {
	t.Helper()
	ln, err := n.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := socks5test.Serve(ln, n.DialContext, user, pw)
	t.Cleanup(s.Close)
	return s
}

func greet(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 3)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hi\n" {
		t.Fatalf("through the proxy: %q %v", buf, err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestDialThroughProxyWithAuth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		dst := echoServer(t, n)
		px := proxyServer(t, n, "probe", "s3cret")
		p, err := New(Config{Forward: n.DialContext, URLs: []string{"socks5://probe:s3cret@" + px.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.Dial(ctx(t), "tcp", dst)
		if err != nil {
			t.Fatal(err)
		}
		greet(t, c)
		c.Close()
		if got := px.Targets(); len(got) != 1 || got[0] != dst {
			t.Fatalf("proxy relayed %v, want %s", got, dst)
		}
	})
}

// A proxy that is down, or refuses our credentials, is set aside and the
// dial goes to the next one; later dials skip it.
func TestFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(t *testing.T, n *memnet.Network) string
	}{
		{"dead", func(t *testing.T, n *memnet.Network) string {
			s := proxyServer(t, n, "", "")
			s.Close()
			return "socks5://" + s.Addr()
		}},
		{"wrong password", func(t *testing.T, n *memnet.Network) string {
			return "socks5://probe:wrong@" + proxyServer(t, n, "probe", "right").Addr()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := memnet.New()
				dst := echoServer(t, n)
				good := proxyServer(t, n, "", "")
				p, err := New(Config{Forward: n.DialContext, URLs: []string{tc.bad(t, n), "socks5://" + good.Addr()}, Backoff: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				for range 4 {
					c, err := p.Dial(ctx(t), "tcp", dst)
					if err != nil {
						t.Fatal(err)
					}
					greet(t, c)
					c.Close()
				}
				if st := p.Stats(); st.Failovers != 1 || st.Down != 1 || good.Accepted() != 4 {
					t.Fatalf("stats %+v, good proxy accepted %d", st, good.Accepted())
				}
			})
		})
	}
	t.Run("all down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := memnet.New()
			dst := echoServer(t, n)
			s := proxyServer(t, n, "", "")
			s.Close()
			p, _ := New(Config{Forward: n.DialContext, URLs: []string{"socks5://" + s.Addr()}})
			for range 2 {
				if _, err := p.Dial(ctx(t), "tcp", dst); !errors.Is(err, ErrNoProxy) {
					t.Fatalf("err %v", err)
				}
			}
		})
	})
}

// A destination the proxy cannot reach is the destination's answer: no
// failover, the proxy stays in use, the error says refused.
func TestDestinationRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		px := proxyServer(t, n, "", "")
		other := proxyServer(t, n, "", "")
		dst := "127.0.0.1:9" // nothing listens
		p, _ := New(Config{Forward: n.DialContext, URLs: []string{"socks5://" + px.Addr(), "socks5://" + other.Addr()}})
		_, err := p.Dial(ctx(t), "tcp", dst)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("err %v", err)
		}
		if st := p.Stats(); st.Failovers != 0 || st.Down != 0 || len(px.Targets())+len(other.Targets()) != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// At most MaxConnsPerProxy connections go through one proxy; past that
// the next proxy takes them, then dials wait for a slot.
func TestMaxConnsPerProxy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		dst := echoServer(t, n)
		a, b := proxyServer(t, n, "", ""), proxyServer(t, n, "", "")
		p, _ := New(Config{Forward: n.DialContext, URLs: []string{"socks5://" + a.Addr(), "socks5://" + b.Addr()}, MaxConnsPerProxy: 1})
		c1, err1 := p.Dial(ctx(t), "tcp", dst)
		c2, err2 := p.Dial(ctx(t), "tcp", dst)
		if err1 != nil || err2 != nil || a.Accepted() != 1 || b.Accepted() != 1 {
			t.Fatalf("errs %v %v, accepted %d %d", err1, err2, a.Accepted(), b.Accepted())
		}
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := p.Dial(short, "tcp", dst); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("third dial with both proxies full: %v after %v, want its deadline (100ms)", err, time.Since(start))
		}
		c1.Close()
		c3, err := p.Dial(ctx(t), "tcp", dst)
		if err != nil {
			t.Fatal(err)
		}
		c2.Close()
		c3.Close()
	})
}

func TestProxyLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		dst := echoServer(t, n)
		px := proxyServer(t, n, "", "")
		p, _ := New(Config{Forward: n.DialContext, URLs: []string{"socks5://" + px.Addr()}})
		c, err := p.Dial(ctx(t), "tcp", dst)
		if err != nil {
			t.Fatal(err)
		}
		greet(t, c)
		if c.(*Conn).ProxyLost() {
			t.Fatal("a live proxy reported lost")
		}
		px.Kill()
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("read through a dead proxy worked")
		}
		if !c.(*Conn).ProxyLost() || p.Stats().Lost != 1 || p.Stats().Down != 1 {
			t.Fatalf("dead proxy not noticed: %+v", p.Stats())
		}
		c.Close()
	})
}

// A proxy that failed is set aside for Backoff, doubling with each failure
// in a row (at most a minute): tried again exactly when its time is up,
// and taken back at its first success.
func TestBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		dst := echoServer(t, n)
		const proxy = "127.0.0.1:1080" // nothing listens: connections refused
		var tries atomic.Int32
		forward := func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == proxy {
				tries.Add(1)
			}
			return n.DialContext(ctx, network, addr)
		}
		p, err := New(Config{Forward: forward, URLs: []string{"socks5://" + proxy}, Backoff: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		dial := func() error {
			c, err := p.Dial(ctx(t), "tcp", dst)
			if err == nil {
				c.Close()
			}
			return err
		}
		if err := dial(); !errors.Is(err, ErrNoProxy) || tries.Load() != 1 {
			t.Fatalf("err %v after %d tries", err, tries.Load())
		}
		for i, aside := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute} {
			simtime.Advance(aside - time.Nanosecond)
			if err := dial(); !errors.Is(err, ErrNoProxy) || tries.Load() != int32(i+1) {
				t.Fatalf("failure %d: %v, tried again %v after it, before its backoff (%v)", i+1, err, aside-time.Nanosecond, aside)
			}
			simtime.Advance(time.Nanosecond)
			if err := dial(); !errors.Is(err, ErrNoProxy) || tries.Load() != int32(i+2) {
				t.Fatalf("failure %d: %v, not tried again after its backoff (%v)", i+1, err, aside)
			}
		}
		// Back up: taken back at its next try.
		up, err := n.Listen("tcp4", proxy)
		if err != nil {
			t.Fatal(err)
		}
		back := socks5test.Serve(up, n.DialContext, "", "")
		t.Cleanup(back.Close)
		simtime.Advance(time.Minute)
		if err := dial(); err != nil || back.Accepted() != 1 || p.Stats().Down != 0 {
			t.Fatalf("err %v, stats %+v, the proxy back up accepted %d", err, p.Stats(), back.Accepted())
		}
	})
}

func TestBadURLs(t *testing.T) {
	for _, u := range []string{"", "http://127.0.0.1:1080", "socks5://127.0.0.1", "socks5://:1080/x", "socks4://h:1", "socks5://user:hunter2@h:1/path"} {
		_, err := New(Config{URLs: []string{u}})
		if err == nil {
			t.Errorf("%q accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	if _, err := New(Config{}); err == nil {
		t.Error("no URL accepted")
	}
}

// PickFor prefers the proxies it is told to, each leaving from its own
// address (the destination sees which); a preferred proxy that is down is
// passed over, and with none preferred it picks in turn.
func TestPickFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		// The destination tells each connection the address it came from.
		serve(t, n, "127.0.0.1:2525", func(c net.Conn) {
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			c.Write([]byte(host + "\n"))
		})
		var urls []string
		var servers []*socks5test.Server
		for _, ip := range []string{"127.0.200.1", "127.0.200.2", "127.0.200.3"} {
			l, err := n.Listen("tcp4", ip+":1080")
			if err != nil {
				t.Fatal(err)
			}
			s := socks5test.Serve(l, n.DialerFrom(netip.MustParseAddr(ip)), "", "")
			t.Cleanup(s.Close)
			servers = append(servers, s)
			urls = append(urls, "socks5://"+s.Addr())
		}
		p, err := New(Config{Forward: n.DialContext, URLs: urls, Backoff: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		from := func(prefer func(string) bool) string {
			t.Helper()
			r, err := p.PickFor(prefer)
			if err != nil {
				t.Fatal(err)
			}
			c, err := r.Dial(ctx(t), "tcp", "127.0.0.1:2525")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			b, _ := io.ReadAll(c)
			return strings.TrimSpace(string(b)) + " " + r.Name()
		}
		only := func(name string) func(string) bool { return func(n string) bool { return n == name } }
		for range 3 {
			if got := from(only("socks5://127.0.200.3:1080")); got != "127.0.200.3 socks5://127.0.200.3:1080" {
				t.Fatalf("preferring the third proxy: from %s", got)
			}
		}
		seen := map[string]bool{}
		for range 3 {
			seen[from(func(string) bool { return false })] = true
		}
		if len(seen) != 3 {
			t.Fatalf("with none preferred, three picks went out from %v", seen)
		}
		servers[2].Kill()
		for p.Stats().Down == 0 { // dials in turn until one meets the dead proxy and sets it aside
			c, err := p.Dial(ctx(t), "tcp", "127.0.0.1:2525")
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		if got := from(only("socks5://127.0.200.3:1080")); strings.HasPrefix(got, "127.0.200.3") {
			t.Fatalf("the preferred proxy is down, yet picked: %s", got)
		}
	})
}
