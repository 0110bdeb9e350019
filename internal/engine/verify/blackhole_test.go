package verify_test

import (
	"context"
	"net"
	"testing"

	"github.com/emaildata/emaildata/internal/kits/memnet"
)

// blackhole returns a DNS server address, on an in-memory network, that
// takes queries and never answers, and the dialer that reaches it.
func blackhole(t *testing.T) (string, func(ctx context.Context, network, addr string) (net.Conn, error)) {
	t.Helper()
	n := memnet.New()
	pc, err := n.ListenPacket("udp", "127.0.0.1:53")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc.LocalAddr().String(), n.DialContext
}
