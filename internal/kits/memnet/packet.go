package memnet

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// maxQueued is how many datagrams an endpoint holds unread; later ones
// are dropped, as a full socket buffer drops them.
const maxQueued = 256

type datagram struct {
	from netip.AddrPort
	b    []byte
}

// packetConn is a datagram endpoint: bound (ListenPacket), or connected
// to one peer (DialContext "udp"), when it is a net.Conn too.
type packetConn struct {
	net      *Network
	ap       netip.AddrPort
	peer     netip.AddrPort // connected: the only source read, the destination of Write
	rdl, wdl *deadline

	mu      sync.Mutex
	queue   []datagram
	changed chan struct{}
	once    sync.Once
	done    chan struct{}
}

func newPacketConn(n *Network, ap, peer netip.AddrPort) *packetConn {
	return &packetConn{net: n, ap: ap, peer: peer, rdl: newDeadline(), wdl: newDeadline(),
		changed: make(chan struct{}), done: make(chan struct{})}
}

func (pc *packetConn) opErr(op string, to net.Addr, err error) error {
	return &net.OpError{Op: op, Net: "udp", Source: pc.LocalAddr(), Addr: to, Err: err}
}

// deliver queues a datagram sent to pc; false when it was dropped.
func (pc *packetConn) deliver(from netip.AddrPort, b []byte) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if isClosed(pc.done) || len(pc.queue) >= maxQueued {
		return false
	}
	pc.queue = append(pc.queue, datagram{from: from, b: append([]byte(nil), b...)})
	close(pc.changed)
	pc.changed = make(chan struct{})
	return true
}

func (pc *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		select {
		case <-pc.done:
			return 0, nil, pc.opErr("read", nil, net.ErrClosed)
		case <-pc.rdl.wait():
			return 0, nil, pc.opErr("read", nil, os.ErrDeadlineExceeded)
		default:
		}
		pc.mu.Lock()
		for len(pc.queue) > 0 {
			d := pc.queue[0]
			pc.queue = pc.queue[1:]
			if pc.peer.IsValid() && d.from != pc.peer {
				continue // a connected endpoint reads its peer only
			}
			pc.mu.Unlock()
			return copy(b, d.b), udpAddr(d.from), nil // the rest of a long datagram is lost, as with UDP
		}
		ch := pc.changed
		pc.mu.Unlock()
		select {
		case <-ch:
		case <-pc.done:
		case <-pc.rdl.wait():
		}
	}
}

// WriteTo sends one datagram. Nobody bound at addr: it is lost, as UDP
// to a closed port is (no error).
func (pc *packetConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	select {
	case <-pc.done:
		return 0, pc.opErr("write", addr, net.ErrClosed)
	case <-pc.wdl.wait():
		return 0, pc.opErr("write", addr, os.ErrDeadlineExceeded)
	default:
	}
	to, err := parse(addr.String())
	if err != nil {
		return 0, pc.opErr("write", addr, err)
	}
	pc.net.mu.Lock()
	dst := pc.net.packets[to]
	if dst == nil {
		dst = pc.net.packets[netip.AddrPortFrom(unspecified(to.Addr()), to.Port())]
	}
	pc.net.mu.Unlock()
	if dst != nil {
		dst.deliver(pc.ap, b)
	}
	return len(b), nil
}

// Read and Write are a connected endpoint's (DialContext "udp").
func (pc *packetConn) Read(b []byte) (int, error) {
	n, _, err := pc.ReadFrom(b)
	return n, err
}

func (pc *packetConn) Write(b []byte) (int, error) {
	if !pc.peer.IsValid() {
		return 0, pc.opErr("write", nil, errNotConnected)
	}
	return pc.WriteTo(b, udpAddr(pc.peer))
}

var errNotConnected = &net.AddrError{Err: "not connected"}

func (pc *packetConn) Close() error {
	first := false
	pc.once.Do(func() {
		first = true
		pc.mu.Lock()
		close(pc.done)
		pc.queue = nil
		pc.mu.Unlock()
		pc.rdl.stop()
		pc.wdl.stop()
		pc.net.mu.Lock()
		if pc.net.packets[pc.ap] == pc {
			delete(pc.net.packets, pc.ap)
		}
		delete(pc.net.used["udp"], pc.ap)
		pc.net.mu.Unlock()
	})
	if !first {
		return pc.opErr("close", nil, net.ErrClosed)
	}
	return nil
}

func (pc *packetConn) LocalAddr() net.Addr { return udpAddr(pc.ap) }

// RemoteAddr is the peer of a connected endpoint, nil otherwise.
func (pc *packetConn) RemoteAddr() net.Addr {
	if !pc.peer.IsValid() {
		return nil
	}
	return udpAddr(pc.peer)
}

func (pc *packetConn) SetDeadline(t time.Time) error {
	pc.rdl.set(t)
	pc.wdl.set(t)
	return nil
}

func (pc *packetConn) SetReadDeadline(t time.Time) error  { pc.rdl.set(t); return nil }
func (pc *packetConn) SetWriteDeadline(t time.Time) error { pc.wdl.set(t); return nil }
