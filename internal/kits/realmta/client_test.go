package realmta

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// A plain SMTP client for testing the kit (not our engine): one command,
// one reply, timed.

type reply struct {
	code int
	msg  string
	took time.Duration
	err  error // a connection error (EOF when the server hung up)
}

func (r reply) String() string {
	if r.err != nil && r.code == 0 {
		return "error: " + r.err.Error()
	}
	return strings.ReplaceAll(fmt.Sprintf("%03d %s", r.code, r.msg), "\n", " | ")
}

type client struct {
	t  testing.TB
	nc net.Conn
	tp *textproto.Conn
}

// dial connects to addr from the loopback source address src ("" for the
// default): anvil and postscreen keep their memory per client address, so
// subtests that count use their own.
func dial(t testing.TB, addr, src string) (*client, reply) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	start := time.Now()
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c := &client{t: t, nc: nc, tp: textproto.NewConn(nc)}
	t.Cleanup(func() { c.nc.Close() })
	r := c.read()
	r.took = time.Since(start)
	return c, r
}

func (c *client) read() reply {
	_ = c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	code, msg, err := c.tp.ReadResponse(0)
	var pe textproto.ProtocolError
	if err != nil && (errors.Is(err, io.EOF) || errors.As(err, &pe) || code == 0) {
		return reply{code: code, msg: msg, err: err}
	}
	return reply{code: code, msg: msg}
}

// cmd sends one command and reads its reply.
func (c *client) cmd(line string) reply {
	start := time.Now()
	if err := c.tp.PrintfLine("%s", line); err != nil {
		return reply{err: err}
	}
	r := c.read()
	r.took = time.Since(start)
	return r
}

// expect runs cmd and fails the test unless the reply starts with want
// (e.g. "250", "550 5.1.1").
func (c *client) expect(line, want string) reply {
	c.t.Helper()
	r := c.cmd(line)
	if !strings.HasPrefix(r.String(), want) {
		c.t.Fatalf("%s: got %q, want %q", line, r, want)
	}
	return r
}

func (c *client) close() { c.nc.Close() }
