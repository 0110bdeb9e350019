package memnet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/nettest"
)

// A stream satisfies net.Conn as the standard library's tests read it
// (reads, writes, deadlines, close, concurrent use).
func TestConnConformance(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		n := New()
		ln, err := n.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, nil, err
		}
		c1, err = n.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			return nil, nil, nil, err
		}
		c2, err = ln.Accept()
		if err != nil {
			return nil, nil, nil, err
		}
		return c1, c2, func() { c1.Close(); c2.Close(); ln.Close() }, nil
	})
}

// Streams: bytes both ways between the addresses dialled and listened
// on, EOF after the peer's Close, a refusal where nothing listens (the
// error real dials give: syscall.ECONNREFUSED), and refusals again once
// the listener is closed.
func TestStreams(t *testing.T) {
	n := New()
	ln, err := n.Listen("tcp4", "127.1.2.3:25")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("tcp", "127.1.2.3:25"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listener on one address: %v", err)
	}
	ctx := context.Background()
	c, err := n.DialContext(ctx, "tcp", "127.1.2.3:25")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if s.LocalAddr().String() != "127.1.2.3:25" || s.RemoteAddr().String() != c.LocalAddr().String() || c.RemoteAddr().String() != "127.1.2.3:25" {
		t.Fatalf("addresses: server %v<-%v, client %v->%v", s.LocalAddr(), s.RemoteAddr(), c.LocalAddr(), c.RemoteAddr())
	}
	if _, err := s.Write([]byte("220 hello\r\n")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := io.ReadAll(c)
	if string(got) != "220 hello\r\n" || err != nil {
		t.Fatalf("client read %q, %v: want the greeting, then EOF", got, err)
	}
	if _, err := c.Write([]byte("QUIT\r\n")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a closed peer: %v", err)
	}
	c.Close()

	for _, addr := range []string{"127.1.2.4:25", "127.1.2.3:26"} {
		if _, err := n.DialContext(ctx, "tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s with nobody listening: %v, want connection refused", addr, err)
		}
	}
	ln.Close()
	if _, err := n.DialContext(ctx, "tcp", "127.1.2.3:25"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after the listener closed: %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept after close: %v", err)
	}
	if _, err := n.Listen("tcp", "127.1.2.3:25"); err != nil {
		t.Fatalf("listen again on a closed listener's address: %v", err)
	}
}

// DialerFrom's connections come from the client address given, one per
// egress identity, so a server tells them apart; DialContext's from
// 127.0.0.1. A destination of the other family is refused.
func TestDialerFrom(t *testing.T) {
	n := New()
	ln, err := n.Listen("tcp", "127.1.2.3:25")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		dial func(context.Context, string, string) (net.Conn, error)
		from string
	}{
		{n.DialerFrom(netip.MustParseAddr("127.0.9.1")), "127.0.9.1"},
		{n.DialerFrom(netip.MustParseAddr("::ffff:127.0.9.2")), "127.0.9.2"},
		{n.DialContext, "127.0.0.1"},
	} {
		c, err := tc.dial(ctx, "tcp", "127.1.2.3:25")
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		host, _, _ := net.SplitHostPort(s.RemoteAddr().String())
		if host != tc.from || c.LocalAddr().String() != s.RemoteAddr().String() {
			t.Fatalf("server sees %v, client is %v: want from %s", s.RemoteAddr(), c.LocalAddr(), tc.from)
		}
		c.Close()
		s.Close()
	}
	if _, err := n.DialerFrom(netip.MustParseAddr("::2"))(ctx, "tcp", "127.1.2.3:25"); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Fatalf("IPv6 client to an IPv4 server: %v", err)
	}
}

// Datagrams: a connected endpoint reaches a bound one and reads its
// answers only; datagrams to nobody are lost without an error.
func TestDatagrams(t *testing.T) {
	n := New()
	srv, err := n.ListenPacket("udp", "127.0.0.53:0")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := n.ListenPacket("udp", "127.0.0.54:53")
	c, err := n.DialContext(context.Background(), "udp", srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(net.PacketConn); !ok {
		t.Fatal("a dialled UDP endpoint is not a net.PacketConn: DNS clients would frame it as TCP")
	}
	if _, err := c.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	k, from, err := srv.ReadFrom(buf)
	if err != nil || string(buf[:k]) != "query" || from.String() != c.LocalAddr().String() {
		t.Fatalf("server read %q from %v, %v", buf[:k], from, err)
	}
	other.WriteTo([]byte("spoof"), from) // not the peer: skipped
	srv.WriteTo([]byte("answer"), from)
	if k, err := c.Read(buf); err != nil || string(buf[:k]) != "answer" {
		t.Fatalf("client read %q, %v", buf[:k], err)
	}
	if _, err := srv.WriteTo([]byte("lost"), &net.UDPAddr{IP: net.IPv4(127, 9, 9, 9), Port: 53}); err != nil {
		t.Fatalf("datagram to nobody: %v", err)
	}
}

// In a synctest bubble a read waits on the bubble's clock: a deadline a
// minute away passes at once in real time and exactly a minute later in
// the bubble's.
func TestDeadlineInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		ln, _ := n.Listen("tcp", "127.0.0.1:25")
		c, err := n.DialContext(t.Context(), "tcp", "127.0.0.1:25")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := ln.Accept()
		start := time.Now()
		c.SetReadDeadline(start.Add(time.Minute))
		_, err = c.Read(make([]byte, 1))
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Minute {
			t.Fatalf("read ended after %v with %v, want the deadline at exactly 1m", time.Since(start), err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%v is not a timeout", err)
		}
		// A moved deadline: the pending read sees the new one.
		go func() {
			time.Sleep(10 * time.Second)
			s.Write([]byte("x"))
		}()
		c.SetReadDeadline(time.Time{})
		if k, err := c.Read(make([]byte, 1)); k != 1 || err != nil || time.Since(start) != time.Minute+10*time.Second {
			t.Fatalf("read %d, %v at %v", k, err, time.Since(start))
		}
		c.Close()
		s.Close()
		ln.Close()
	})
}

// A full buffer blocks the writer until the reader takes some.
func TestWriterWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New()
		ln, _ := n.Listen("tcp", "127.0.0.1:25")
		c, _ := n.DialContext(t.Context(), "tcp", "127.0.0.1:25")
		s, _ := ln.Accept()
		done := make(chan int)
		go func() {
			k, _ := c.Write(make([]byte, maxBuffered+10))
			done <- k
		}()
		synctest.Wait()
		select {
		case k := <-done:
			t.Fatalf("wrote %d bytes past a full buffer with nobody reading", k)
		default:
		}
		if _, err := io.ReadFull(s, make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		if k := <-done; k != maxBuffered+10 {
			t.Fatalf("wrote %d", k)
		}
		c.Close()
		s.Close()
	})
}
