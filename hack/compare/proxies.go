package main

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/emaildata/emaildata/internal/engine/proxypool/socks5test"
)

// proxyBase is the loopback block the relays dial the world from, one
// address each: outside every world's hosts (127.B.x.y with B at most 239)
// and outside 127.0.0.0/16, where the tools themselves connect from.
var proxyBase = netip.MustParseAddr("127.250.0.1")

// startProxies starts n SOCKS5 relays on 127.0.0.1 (-proxies), relay i
// dialing the world from proxyBase+i: n egress identities, which a host
// that judges clients by address (a reputation delay) tells apart, as
// production's relays (verification.proxies.urls) are.
func startProxies(n int) (urls []string, stop func(), err error) {
	var servers []*socks5test.Server
	stop = func() {
		for _, s := range servers {
			s.Close()
		}
	}
	from := proxyBase
	for range n {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
		s := socks5test.Serve(ln, d.DialContext, "", "")
		servers = append(servers, s)
		urls = append(urls, fmt.Sprintf("socks5://%s", s.Addr()))
		from = from.Next()
	}
	return urls, stop, nil
}
