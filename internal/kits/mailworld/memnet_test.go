package mailworld

import (
	"context"
	"errors"
	"io"
	"net"
	"net/textproto"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/emaildata/emaildata/internal/kits/memnet"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// startMem starts a world on an in-memory network inside the caller's
// synctest bubble.
func startMem(t *testing.T, domains []Domain, opts Options) (*World, *memnet.Network) {
	t.Helper()
	n := memnet.New()
	opts.Network = n
	w, err := Start(context.Background(), domains, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w, n
}

func dialMem(t *testing.T, n *memnet.Network, addr string) *client {
	t.Helper()
	nc, err := n.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c := &client{t: t, nc: nc, tp: textproto.NewConn(nc)}
	t.Cleanup(func() { nc.Close() })
	return c
}

// A world on an in-memory network answers DNS over UDP and TCP and SMTP
// as on loopback, and its timing rules hold exactly on the bubble's
// clock: a pair greylisted for 60 s is refused at 59.999999999 s and
// accepted at 60 s; a refusing primary refuses as a closed port does.
func TestOnMemnetInSimulatedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, n := startMem(t, []Domain{
			{Name: "grey.test", Greylist: time.Minute, Mailboxes: map[string]Behaviour{"alice": Exists}, PrimaryDown: true},
		}, Options{})
		if w.DNSAddr() != "127.0.0.53:53" || w.SMTPPort() != 25 {
			t.Fatalf("DNS at %s, SMTP port %d", w.DNSAddr(), w.SMTPPort())
		}
		for _, network := range []string{"udp", "tcp"} {
			c, err := n.DialContext(context.Background(), network, w.DNSAddr())
			if err != nil {
				t.Fatal(err)
			}
			co := &dns.Conn{Conn: c}
			m := new(dns.Msg)
			m.SetQuestion("grey.test.", dns.TypeMX)
			if err := co.WriteMsg(m); err != nil {
				t.Fatal(err)
			}
			r, err := co.ReadMsg()
			if err != nil || len(r.Answer) != 2 {
				t.Fatalf("%s: MX answer %v, %v", network, r, err)
			}
			co.Close()
		}

		addrs := w.MXAddrs("grey.test")
		if _, err := n.DialContext(context.Background(), "tcp", addrs[0]); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("the down primary: %v, want connection refused", err)
		}
		c := dialMem(t, n, addrs[1])
		c.expect(220, "ESMTP")
		c.do(250, "PIPELINING", "EHLO verifier.test")
		c.do(250, "2.1.0", "MAIL FROM:<probe@verifier.test>")
		c.do(451, "Greylisted", "RCPT TO:<alice@grey.test>")
		simtime.Advance(time.Minute - time.Nanosecond)
		c.do(451, "Greylisted", "RCPT TO:<alice@grey.test>")
		simtime.Advance(time.Nanosecond)
		c.do(250, "2.1.5", "RCPT TO:<alice@grey.test>")
		c.do(221, "Bye", "QUIT")
		if _, err := io.ReadAll(c.nc); err != nil {
			t.Fatalf("after QUIT: %v", err)
		}
		if hs := w.Stats().Hosts["mx2.grey.test"]; hs.RCPT != 3 || hs.Total != 1 {
			t.Fatalf("host stats %+v", hs)
		}
	})
}

// The round trip is the configured latency to the nanosecond, pipelined
// commands answered together.
func TestLatencyOnMemnet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, n := startMem(t, []Domain{{Name: "far.test", Mailboxes: map[string]Behaviour{"alice": Exists}}}, Options{Latency: 40 * time.Millisecond})
		start := time.Now()
		c := dialMem(t, n, w.MXAddrs("far.test")[0])
		c.expect(220, "ESMTP")
		c.do(250, "PIPELINING", "EHLO verifier.test")
		c.send("MAIL FROM:<probe@verifier.test>")
		c.send("RCPT TO:<alice@far.test>")
		c.expect(250, "2.1.0")
		c.expect(250, "2.1.5")
		if took := time.Since(start); took != 3*40*time.Millisecond {
			t.Fatalf("three round trips took %v, want 120ms", took)
		}
	})
}

// A tarpit holds the connection, silent, for exactly its hang-up time.
func TestTarpitOnMemnet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, n := startMem(t, []Domain{{Name: "pit.test", Tarpit: true, TarpitHangup: 90 * time.Second}}, Options{})
		start := time.Now()
		c := dialMem(t, n, w.MXAddrs("pit.test")[0])
		b, err := io.ReadAll(c.nc)
		if len(b) != 0 || err != nil || time.Since(start) != 90*time.Second {
			t.Fatalf("read %q, %v after %v: want nothing, then EOF at 90s", b, err, time.Since(start))
		}
		var ne net.Error
		c2 := dialMem(t, n, w.MXAddrs("pit.test")[0])
		c2.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := c2.nc.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("a client's own deadline: %v", err)
		}
	})
}

// A sliding-window rate limit (Domain.ConnRateSliding, as sendmail's
// ratecontrol and Haraka's limit count): every attempt within the last
// window counts, refused ones too, so a retry inside the window is
// refused again and keeps the window full; a full window after the last
// attempt, the client is taken again.
func TestConnRateSlidingInSimulatedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 6 * time.Second
		w, n := startMem(t, []Domain{{Name: "slide.test", ConnRateLimit: 2, ConnRateWindow: window, ConnRateSliding: true}}, Options{})
		addr := w.MXAddrs("slide.test")[0]
		t0 := time.Now()
		try := func(at time.Duration, code int) {
			t.Helper()
			time.Sleep(time.Until(t0.Add(at)))
			c := dialMem(t, n, addr)
			c.expect(code, "")
			if code == 220 {
				c.do(221, "", "QUIT")
			}
		}
		half := 500 * time.Millisecond
		try(0, 220)
		try(time.Second, 220)
		try(2*time.Second, 421)             // 3 in the window
		try(window+half, 421)               // anvil's fixed window (a new one from 6 s) would take this one
		try(window+time.Second+half, 421)   // the first has left; the refused ones count
		try(2*window+time.Second+half, 220) // a full window after the last attempt
		hs := w.Stats().Hosts["mx1.slide.test"]
		if hs.Rejected != 3 || hs.Total != 6 {
			t.Fatalf("stats %+v: want 3 of 6 refused", hs)
		}
	})
}
