package evhistory

import (
	"net/netip"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
)

type (
	mxdnsResult = mxdns.Result
	mxdnsHost   = mxdns.MXHost
)

var okResult = mxdns.Result{Status: mxdns.OK, MX: []mxdns.MXHost{{Host: "mx.example.test", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}}}
