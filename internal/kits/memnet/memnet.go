// Package memnet is a test kit: an IP network in memory, for tests that
// run servers and clients in one process in simulated time.
//
// A goroutine blocked on a real socket is not "durably blocked" in a
// testing/synctest bubble (the kernel could wake it), so a bubble whose
// goroutines wait on loopback sockets never lets its clock advance. Every
// wait here is on a channel created in the caller's bubble (data, a
// deadline's timer, a close), so a mail world and the engine talking over
// a Network inside synctest.Test move through minutes of timeouts,
// greylisting windows and backoffs in milliseconds of real time. Outside a
// bubble it behaves the same on the real clock.
//
// A Network carries streams ("tcp", like TCP: ordered bytes, buffered
// both ways, EOF after the peer's Close, connection refused where nothing
// listens) and datagrams ("udp", like UDP: one message a write, dropped
// where nothing is bound or when the receiver's queue is full). Addresses
// are IP literals with ports; a host is any IP, so a world can put each
// server on its own 127.x.y.z. Listen and ListenPacket mirror net.Listen
// and net.ListenPacket; DialContext fits where a net.Dialer's does
// (smtpprobe.Config.Dialer, mxdns.Config.Dial, proxypool.Config.Forward).
// DialerFrom dials from a client address of the caller's: each egress
// identity of a test (a SOCKS5 proxy on its own 127.x address) is then a
// client address of its own to the servers, which can keep per-client
// state (connection rates, reputation) apart.
//
// Create a Network inside the bubble that uses it: its channels belong to
// the bubble they were made in.
package memnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
)

// Network is an in-memory network. The zero value is not usable; call New.
type Network struct {
	mu      sync.Mutex
	streams map[netip.AddrPort]*listener
	packets map[netip.AddrPort]*packetConn
	used    map[string]map[netip.AddrPort]bool // "tcp"/"udp" → ports taken (listeners, packet conns, dialled ends)
	next    uint16                             // next ephemeral port to try

	client4, client6 netip.Addr
}

// New returns an empty network. Dialled connections come from 127.0.0.1
// (or ::1 for IPv6 destinations) and an ephemeral port.
func New() *Network {
	return &Network{
		streams: map[netip.AddrPort]*listener{},
		packets: map[netip.AddrPort]*packetConn{},
		used:    map[string]map[netip.AddrPort]bool{"tcp": {}, "udp": {}},
		next:    firstEphemeral,
		client4: netip.MustParseAddr("127.0.0.1"),
		client6: netip.IPv6Loopback(),
	}
}

const (
	firstEphemeral = 32768
	backlog        = 1024 // connections a listener queues before refusing
)

// kind maps a network name to "tcp" or "udp".
func kind(network string) (string, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
		return "tcp", nil
	case "udp", "udp4", "udp6":
		return "udp", nil
	}
	return "", net.UnknownNetworkError(network)
}

// parse reads "ip:port"; an empty host is the unspecified address.
func parse(address string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		host = "0.0.0.0"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("memnet: %q: only IP literals are supported", address)
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(ip.Unmap().String(), port))
	if err != nil {
		return netip.AddrPort{}, err
	}
	return ap, nil
}

func tcpAddr(ap netip.AddrPort) *net.TCPAddr { return net.TCPAddrFromAddrPort(ap) }
func udpAddr(ap netip.AddrPort) *net.UDPAddr { return net.UDPAddrFromAddrPort(ap) }

// bindLocked takes ap (a free ephemeral port when its port is 0) for k.
func (n *Network) bindLocked(k string, ap netip.AddrPort) (netip.AddrPort, error) {
	used := n.used[k]
	if ap.Port() != 0 {
		if used[ap] || used[netip.AddrPortFrom(unspecified(ap.Addr()), ap.Port())] {
			return ap, syscall.EADDRINUSE
		}
		used[ap] = true
		return ap, nil
	}
	for range 65536 - firstEphemeral {
		p := n.next
		if n.next++; n.next == 0 {
			n.next = firstEphemeral
		}
		c := netip.AddrPortFrom(ap.Addr(), p)
		if !used[c] {
			used[c] = true
			return c, nil
		}
	}
	return ap, syscall.EADDRNOTAVAIL
}

func unspecified(ip netip.Addr) netip.Addr {
	if ip.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

func (n *Network) release(k string, ap netip.AddrPort) {
	n.mu.Lock()
	delete(n.used[k], ap)
	n.mu.Unlock()
}

// Listen listens for streams on address ("tcp", "tcp4" or "tcp6"; port 0
// picks one).
func (n *Network) Listen(network, address string) (net.Listener, error) {
	k, err := kind(network)
	if err == nil && k != "tcp" {
		err = net.UnknownNetworkError(network)
	}
	ap, perr := parse(address)
	if err == nil {
		err = perr
	}
	if err == nil {
		n.mu.Lock()
		if ap, err = n.bindLocked("tcp", ap); err == nil {
			l := &listener{net: n, ap: ap, queue: make(chan *conn, backlog), done: make(chan struct{})}
			n.streams[ap] = l
			n.mu.Unlock()
			return l, nil
		}
		n.mu.Unlock()
	}
	return nil, &net.OpError{Op: "listen", Net: network, Err: err}
}

// ListenPacket binds a datagram endpoint on address ("udp", "udp4" or
// "udp6"; port 0 picks one).
func (n *Network) ListenPacket(network, address string) (net.PacketConn, error) {
	k, err := kind(network)
	if err == nil && k != "udp" {
		err = net.UnknownNetworkError(network)
	}
	ap, perr := parse(address)
	if err == nil {
		err = perr
	}
	if err == nil {
		n.mu.Lock()
		if ap, err = n.bindLocked("udp", ap); err == nil {
			pc := newPacketConn(n, ap, netip.AddrPort{})
			n.packets[ap] = pc
			n.mu.Unlock()
			return pc, nil
		}
		n.mu.Unlock()
	}
	return nil, &net.OpError{Op: "listen", Net: network, Err: err}
}

// DialContext connects to address: a stream to a listener ("tcp"), or a
// connected datagram endpoint ("udp", which reads only what address
// sends). A stream to an address nobody listens on is refused
// (syscall.ECONNREFUSED), as a host whose port is closed does.
func (n *Network) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return n.dial(ctx, network, address, netip.Addr{})
}

// DialerFrom returns a DialContext whose connections come from client
// address from (an ephemeral port on it), as a socket bound before
// connect does: a proxy's outgoing connections leave from its own
// address. Dials to a destination of the other address family fail.
func (n *Network) DialerFrom(from netip.Addr) func(ctx context.Context, network, address string) (net.Conn, error) {
	from = from.Unmap()
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		return n.dial(ctx, network, address, from)
	}
}

// dial dials address from client address from (invalid: the loopback
// address of the destination's family).
func (n *Network) dial(ctx context.Context, network, address string, from netip.Addr) (net.Conn, error) {
	k, err := kind(network)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	to, err := parse(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: addrOf(k, to), Err: err}
	}
	switch {
	case !from.IsValid() && to.Addr().Is6():
		from = n.client6
	case !from.IsValid():
		from = n.client4
	case from.Is4() != to.Addr().Is4():
		return nil, &net.OpError{Op: "dial", Net: network, Addr: addrOf(k, to), Err: syscall.EAFNOSUPPORT}
	}
	return n.dialFrom(network, k, from, to)
}

// dialFrom dials to from client address from.
func (n *Network) dialFrom(network, k string, from netip.Addr, to netip.AddrPort) (net.Conn, error) {
	if k == "udp" {
		n.mu.Lock()
		defer n.mu.Unlock()
		ap, err := n.bindLocked("udp", netip.AddrPortFrom(from, 0))
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Addr: udpAddr(to), Err: err}
		}
		pc := newPacketConn(n, ap, to)
		n.packets[ap] = pc
		return pc, nil
	}
	return n.dialStream(network, from, to)
}

func addrOf(k string, ap netip.AddrPort) net.Addr {
	if k == "udp" {
		return udpAddr(ap)
	}
	return tcpAddr(ap)
}

func (n *Network) dialStream(network string, from netip.Addr, to netip.AddrPort) (net.Conn, error) {
	n.mu.Lock()
	l := n.streams[to]
	if l == nil {
		l = n.streams[netip.AddrPortFrom(unspecified(to.Addr()), to.Port())]
	}
	var local netip.AddrPort
	var err error
	if l != nil {
		local, err = n.bindLocked("tcp", netip.AddrPortFrom(from, 0))
	}
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Addr: tcpAddr(to), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if l == nil {
		return nil, refused
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: tcpAddr(to), Err: err}
	}
	client, server := newConnPair(tcpAddr(local), tcpAddr(to))
	client.onClose = func() { n.release("tcp", local) }
	if !l.enqueue(server) {
		n.release("tcp", local)
		return nil, refused
	}
	return client, nil
}

// listener is a stream listener.
type listener struct {
	net   *Network
	ap    netip.AddrPort
	mu    sync.Mutex
	shut  bool
	queue chan *conn
	done  chan struct{}
}

// enqueue hands a new connection's server end to Accept; false when the
// listener is closed or its backlog full.
func (l *listener) enqueue(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		return false
	}
	select {
	case l.queue <- c:
		return true
	default:
		return false
	}
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.queue:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
}

// Close stops listening: later dials are refused, and the connections
// queued and not accepted are closed (their clients read EOF).
func (l *listener) Close() error {
	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
	l.shut = true
	close(l.done)
	l.mu.Unlock()
	l.net.mu.Lock()
	delete(l.net.streams, l.ap)
	delete(l.net.used["tcp"], l.ap)
	l.net.mu.Unlock()
	for {
		select {
		case c := <-l.queue:
			c.Close()
		default:
			return nil
		}
	}
}

func (l *listener) Addr() net.Addr { return tcpAddr(l.ap) }
