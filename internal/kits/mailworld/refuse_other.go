//go:build !unix

package mailworld

import (
	"io"
	"net"
	"net/netip"
	"strconv"
)

// bindRefusing reserves nothing on this platform: it picks a free port by
// listening briefly, so connections to ip:port are (most likely) refused.
func bindRefusing(ip netip.Addr, port int) (io.Closer, int, error) {
	ln, err := net.Listen("tcp4", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	if err != nil {
		return nil, 0, err
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return io.NopCloser(nil), p, nil
}
