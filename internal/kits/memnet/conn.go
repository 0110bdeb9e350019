package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// maxBuffered is what one direction of a stream holds unread before its
// writer blocks, as a socket's buffers do.
const maxBuffered = 1 << 20

// pipe is one direction of a stream: bytes written and not yet read.
type pipe struct {
	mu      sync.Mutex
	buf     []byte
	eof     bool          // the writer closed: EOF once buf is read
	broken  bool          // the reader closed: writes fail
	changed chan struct{} // closed and replaced at every change
}

func newPipe() *pipe { return &pipe{changed: make(chan struct{})} }

// signalLocked wakes every goroutine waiting for a change.
func (p *pipe) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// conn is one end of a stream.
type conn struct {
	local, remote net.Addr
	in, out       *pipe // what this end reads, what it writes
	rdl, wdl      *deadline
	once          sync.Once
	done          chan struct{} // closed by Close
	onClose       func()
}

func newConnPair(clientAddr, serverAddr net.Addr) (client, server *conn) {
	a, b := newPipe(), newPipe() // a: client to server, b: server to client
	client = &conn{local: clientAddr, remote: serverAddr, in: b, out: a, rdl: newDeadline(), wdl: newDeadline(), done: make(chan struct{})}
	server = &conn{local: serverAddr, remote: clientAddr, in: a, out: b, rdl: newDeadline(), wdl: newDeadline(), done: make(chan struct{})}
	return client, server
}

func (c *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

// blocked reports why this end cannot go on now: closed, or past the
// deadline d.
func (c *conn) blocked(op string, d *deadline) error {
	select {
	case <-c.done:
		return c.opErr(op, net.ErrClosed)
	default:
	}
	select {
	case <-d.wait():
		return c.opErr(op, os.ErrDeadlineExceeded)
	default:
	}
	return nil
}

func (c *conn) Read(b []byte) (int, error) {
	for {
		if err := c.blocked("read", c.rdl); err != nil {
			return 0, err
		}
		p := c.in
		p.mu.Lock()
		if len(p.buf) > 0 || len(b) == 0 {
			n := copy(b, p.buf)
			p.buf = p.buf[n:]
			if len(p.buf) == 0 {
				p.buf = nil
			}
			p.signalLocked() // room for a blocked writer
			p.mu.Unlock()
			return n, nil
		}
		if p.eof {
			p.mu.Unlock()
			return 0, io.EOF
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-c.done:
		case <-c.rdl.wait():
		}
	}
}

func (c *conn) Write(b []byte) (int, error) {
	n := 0
	for {
		if err := c.blocked("write", c.wdl); err != nil {
			return n, err
		}
		p := c.out
		p.mu.Lock()
		if p.broken || p.eof {
			p.mu.Unlock()
			return n, c.opErr("write", os.NewSyscallError("write", syscall.EPIPE))
		}
		if room := maxBuffered - len(p.buf); room > 0 {
			k := min(room, len(b))
			p.buf = append(p.buf, b[:k]...)
			b, n = b[k:], n+k
			p.signalLocked()
		}
		if len(b) == 0 {
			p.mu.Unlock()
			return n, nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-c.done:
		case <-c.wdl.wait():
		}
	}
}

// Close ends both directions: the peer reads what was written, then EOF;
// its writes fail from then on.
func (c *conn) Close() error {
	first := false
	c.once.Do(func() {
		first = true
		close(c.done)
		c.out.mu.Lock()
		c.out.eof = true
		c.out.signalLocked()
		c.out.mu.Unlock()
		c.in.mu.Lock()
		c.in.broken, c.in.buf = true, nil
		c.in.signalLocked()
		c.in.mu.Unlock()
		c.rdl.stop()
		c.wdl.stop()
		if c.onClose != nil {
			c.onClose()
		}
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error  { c.rdl.set(t); return nil }
func (c *conn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

// deadline is a settable point in time whose passing closes a channel, as
// net.Pipe's deadlines do: its timer belongs to the bubble that set it.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	passed chan struct{} // closed once the deadline passed
}

func newDeadline() *deadline { return &deadline{passed: make(chan struct{})} }

// set moves the deadline to t (the zero time: none).
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.passed // its function ran (or is running): wait until it closed passed
	}
	d.timer = nil
	closed := isClosed(d.passed)
	if t.IsZero() {
		if closed {
			d.passed = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.passed = make(chan struct{})
		}
		ch := d.passed
		d.timer = time.AfterFunc(dur, func() { close(ch) })
		return
	}
	if !closed {
		close(d.passed)
	}
}

// wait returns the channel closed when the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.passed
}

// stop drops a pending timer (the connection is closed).
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
