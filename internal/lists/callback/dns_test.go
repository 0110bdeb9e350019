package callback

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeDNS is a minimal UDP DNS server on 127.0.0.1 that answers every A query
// with 127.0.0.1 and every AAAA query with ::1, whatever the name. Paired
// with resolver(), it lets tests resolve arbitrary names (including numeric
// ones like "2130706433") to loopback without any DNS traffic leaving the
// machine.
type fakeDNS struct {
	conn    net.PacketConn
	queries atomic.Int64
	wg      sync.WaitGroup
}

func startFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake DNS listen: %v", err)
	}
	s := &fakeDNS{conn: conn}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(func() {
		conn.Close()
		s.wg.Wait()
	})
	return s
}

// resolver returns a pure-Go resolver that sends every query, whichever
// nameserver it meant to ask, to the fake server.
func (s *fakeDNS) resolver() *net.Resolver {
	addr := s.conn.LocalAddr().String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp4", addr)
		},
	}
}

func (s *fakeDNS) serve() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := answer(buf[:n]); resp != nil {
			s.queries.Add(1)
			s.conn.WriteTo(resp, from)
		}
	}
}

// answer builds a response for a single-question query.
func answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// Skip the question name.
	i := 12
	for i < len(q) && q[i] != 0 {
		i += int(q[i]) + 1
	}
	i++ // terminating zero
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i : i+2])
	question := q[12 : i+4]

	var rdata []byte
	switch qtype {
	case 1: // A
		rdata = []byte{127, 0, 0, 1}
	case 28: // AAAA
		rdata = net.IPv6loopback
	}

	resp := make([]byte, 12, 12+len(question)+16+len(rdata))
	copy(resp[0:2], q[0:2])                       // ID
	binary.BigEndian.PutUint16(resp[2:4], 0x8180) // QR, RD, RA, NOERROR
	binary.BigEndian.PutUint16(resp[4:6], 1)      // QDCOUNT
	if rdata != nil {
		binary.BigEndian.PutUint16(resp[6:8], 1) // ANCOUNT
	}
	resp = append(resp, question...)
	if rdata != nil {
		resp = append(resp, 0xC0, 12) // pointer to the question name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // class IN
		resp = binary.BigEndian.AppendUint32(resp, 60)
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(rdata)))
		resp = append(resp, rdata...)
	}
	return resp
}
