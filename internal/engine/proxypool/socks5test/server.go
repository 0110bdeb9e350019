// Package socks5test is test infrastructure: a small SOCKS5 server (RFC
// 1928 CONNECT, RFC 1929 username/password) on loopback, or on a listener
// and dialer of the test's (an in-memory network, for tests in simulated
// time), that records what it relays, can refuse destinations, and can die
// mid-session. It only connects to loopback destinations.
package socks5test

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
)

// Server is a running SOCKS5 server.
type Server struct {
	ln       net.Listener
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	user, pw string // empty: no authentication

	mu       sync.Mutex
	targets  []string // CONNECT destinations, in order
	relays   map[net.Conn]struct{}
	refuse   map[string]byte // destination → reply code
	accepted int
	wg       sync.WaitGroup
}

// Start listens on 127.0.0.1; user and pw, when set, are required.
func Start(user, pw string) (*Server, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return Serve(ln, d.DialContext, user, pw), nil
}

// Serve serves on ln, relaying through dial; user and pw, when set, are
// required. Close closes ln.
func Serve(ln net.Listener, dial func(ctx context.Context, network, addr string) (net.Conn, error), user, pw string) *Server {
	s := &Server{ln: ln, dial: dial, user: user, pw: pw, relays: map[net.Conn]struct{}{}, refuse: map[string]byte{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Refuse makes CONNECTs to dst fail with reply code (e.g. 5: connection
// refused).
func (s *Server) Refuse(dst string, code byte) {
	s.mu.Lock()
	s.refuse[dst] = code
	s.mu.Unlock()
}

// Targets returns the CONNECT destinations so far.
func (s *Server) Targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

// Accepted is the number of client connections so far.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Kill stops listening and cuts every relayed connection: the proxy dies
// mid-session.
func (s *Server) Kill() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.relays {
		c.Close()
	}
	s.mu.Unlock()
}

// Close kills the server and waits for its goroutines.
func (s *Server) Close() {
	s.Kill()
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.accepted++
		s.relays[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.drop(c)
			s.serve(c)
		}()
	}
}

func (s *Server) drop(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.relays, c)
	s.mu.Unlock()
}

func (s *Server) serve(c net.Conn) {
	br := bufio.NewReader(c)
	if !s.handshake(br, c) {
		return
	}
	dst, ok := readRequest(br)
	if !ok {
		c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	s.mu.Lock()
	s.targets = append(s.targets, dst)
	code, refused := s.refuse[dst]
	s.mu.Unlock()
	ap, err := netip.ParseAddrPort(dst)
	switch {
	case refused:
	case err != nil || !ap.Addr().IsLoopback():
		code = 2 // not allowed by ruleset: this test proxy stays on loopback
	default:
		up, err := s.dial(context.Background(), "tcp", dst)
		if err != nil {
			code = 5
			break
		}
		defer up.Close()
		s.mu.Lock()
		s.relays[up] = struct{}{}
		s.mu.Unlock()
		defer s.drop(up)
		if _, err := c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0}); err != nil {
			return
		}
		done := make(chan struct{}, 2)
		go func() { io.Copy(up, br); up.Close(); done <- struct{}{} }()
		go func() { io.Copy(c, up); c.Close(); done <- struct{}{} }()
		<-done
		<-done
		return
	}
	c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}

// handshake negotiates the method (and checks credentials).
func (s *Server) handshake(br *bufio.Reader, c net.Conn) bool {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != 5 {
		return false
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return false
	}
	want := byte(0)
	if s.user != "" {
		want = 2
	}
	for _, m := range methods {
		if m == want {
			c.Write([]byte{5, want})
			return want == 0 || s.login(br, c)
		}
	}
	c.Write([]byte{5, 0xff})
	return false
}

func (s *Server) login(br *bufio.Reader, c net.Conn) bool {
	read := func() (string, bool) {
		n, err := br.ReadByte()
		if err != nil {
			return "", false
		}
		b := make([]byte, n)
		_, err = io.ReadFull(br, b)
		return string(b), err == nil
	}
	if v, err := br.ReadByte(); err != nil || v != 1 {
		return false
	}
	u, ok1 := read()
	p, ok2 := read()
	if !ok1 || !ok2 || u != s.user || p != s.pw {
		c.Write([]byte{1, 1})
		return false
	}
	c.Write([]byte{1, 0})
	return true
}

// readRequest reads a CONNECT request and returns its destination.
func readRequest(br *bufio.Reader) (string, bool) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != 5 || hdr[1] != 1 {
		return "", false
	}
	var host string
	switch hdr[3] {
	case 1:
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", false
		}
		host = netip.AddrFrom4(a).String()
	case 4:
		var a [16]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", false
		}
		host = netip.AddrFrom16(a).String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return "", false
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return "", false
		}
		host = string(b)
	default:
		return "", false
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))), true
}
