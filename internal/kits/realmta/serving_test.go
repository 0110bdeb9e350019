package realmta

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestWaitGreeting: a daemon that listens but does not accept yet (as
// Exim once did for 10 s under load) is not up until it greets; the probe
// comes from probeAddr and ends with NOOP probeMark and QUIT.
func TestWaitGreeting(t *testing.T) {
	r := &Running{}
	if err := r.opt.defaults(); err != nil {
		t.Fatal(err)
	}
	host := r.opt.addr(1, 1)
	l, err := net.Listen("tcp4", netip.AddrPortFrom(host, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r.port = l.Addr().(*net.TCPAddr).Port
	const late = 300 * time.Millisecond
	type seen struct {
		from string
		cmds []string
	}
	got := make(chan seen, 1)
	go func() {
		time.Sleep(late) // listening, not serving
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s := seen{from: c.RemoteAddr().(*net.TCPAddr).IP.String()}
		_, _ = c.Write([]byte("220 mx.test ESMTP\r\n"))
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				break
			}
			s.cmds = append(s.cmds, strings.TrimSpace(line))
			if strings.HasPrefix(line, "QUIT") {
				_, _ = c.Write([]byte("221 bye\r\n"))
				break
			}
			_, _ = c.Write([]byte("250 ok\r\n"))
		}
		got <- s
	}()
	t0 := time.Now()
	if err := r.waitGreeting(nil, []netip.Addr{host}, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < late {
		t.Errorf("up after %v, before the daemon served (%v)", d, late)
	}
	s := <-got
	if s.from != r.probeAddr().String() {
		t.Errorf("probe from %s, want %s", s.from, r.probeAddr())
	}
	if want := []string{"NOOP " + probeMark, "QUIT"}; strings.Join(s.cmds, "|") != strings.Join(want, "|") {
		t.Errorf("probe said %q, want %q", s.cmds, want)
	}

	// One that never greets is not up by the deadline.
	silent, err := net.Listen("tcp4", netip.AddrPortFrom(r.opt.addr(1, 2), uint16(r.port)).String())
	if err != nil {
		t.Fatalf("port %d taken on %s: %v", r.port, r.opt.addr(1, 2), err)
	}
	defer silent.Close()
	if err := r.waitGreeting(nil, []netip.Addr{r.opt.addr(1, 2)}, time.Now().Add(500*time.Millisecond)); err == nil {
		t.Error("a daemon that never greets was taken as up")
	}
}
