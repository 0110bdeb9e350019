package proxypool

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/engine/proxypool/socks5test"
)

// echoServer answers every connection with "hi\n" and then echoes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
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
				c.Write([]byte("hi\n"))
				io.Copy(c, c)
			})
		}
	})
	return ln.Addr().String()
}

func proxyServer(t *testing.T, user, pw string) *socks5test.Server {
	t.Helper()
	s, err := socks5test.Start(user, pw)
	if err != nil {
		t.Fatal(err)
	}
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
	dst := echoServer(t)
	px := proxyServer(t, "probe", "s3cret")
	p, err := New(Config{URLs: []string{"socks5://probe:s3cret@" + px.Addr()}})
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
}

// A proxy that is down, or refuses our credentials, is set aside and the
// dial goes to the next one; later dials skip it.
func TestFailover(t *testing.T) {
	dst := echoServer(t)
	for _, tc := range []struct {
		name string
		bad  func(t *testing.T) string
	}{
		{"dead", func(t *testing.T) string {
			s := proxyServer(t, "", "")
			s.Close()
			return "socks5://" + s.Addr()
		}},
		{"wrong password", func(t *testing.T) string {
			return "socks5://probe:wrong@" + proxyServer(t, "probe", "right").Addr()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := proxyServer(t, "", "")
			p, err := New(Config{URLs: []string{tc.bad(t), "socks5://" + good.Addr()}, Backoff: time.Minute})
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
	}
	t.Run("all down", func(t *testing.T) {
		s := proxyServer(t, "", "")
		s.Close()
		p, _ := New(Config{URLs: []string{"socks5://" + s.Addr()}})
		for range 2 {
			if _, err := p.Dial(ctx(t), "tcp", dst); !errors.Is(err, ErrNoProxy) {
				t.Fatalf("err %v", err)
			}
		}
	})
}

// A destination the proxy cannot reach is the destination's answer: no
// failover, the proxy stays in use, the error says refused.
func TestDestinationRefused(t *testing.T) {
	px := proxyServer(t, "", "")
	other := proxyServer(t, "", "")
	dst := "127.0.0.1:9" // discard port, nothing listens
	p, _ := New(Config{URLs: []string{"socks5://" + px.Addr(), "socks5://" + other.Addr()}})
	_, err := p.Dial(ctx(t), "tcp", dst)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err %v", err)
	}
	if st := p.Stats(); st.Failovers != 0 || st.Down != 0 || len(px.Targets())+len(other.Targets()) != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// At most MaxConnsPerProxy connections go through one proxy; past that
// the next proxy takes them, then dials wait for a slot.
func TestMaxConnsPerProxy(t *testing.T) {
	dst := echoServer(t)
	a, b := proxyServer(t, "", ""), proxyServer(t, "", "")
	p, _ := New(Config{URLs: []string{"socks5://" + a.Addr(), "socks5://" + b.Addr()}, MaxConnsPerProxy: 1})
	c1, err1 := p.Dial(ctx(t), "tcp", dst)
	c2, err2 := p.Dial(ctx(t), "tcp", dst)
	if err1 != nil || err2 != nil || a.Accepted() != 1 || b.Accepted() != 1 {
		t.Fatalf("errs %v %v, accepted %d %d", err1, err2, a.Accepted(), b.Accepted())
	}
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Dial(short, "tcp", dst); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third dial with both proxies full: %v", err)
	}
	c1.Close()
	c3, err := p.Dial(ctx(t), "tcp", dst)
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	c3.Close()
}

func TestProxyLost(t *testing.T) {
	dst := echoServer(t)
	px := proxyServer(t, "", "")
	p, _ := New(Config{URLs: []string{"socks5://" + px.Addr()}})
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
