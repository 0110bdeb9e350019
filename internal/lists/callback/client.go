package callback

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DefaultTimeout bounds a whole delivery attempt when Client is given a
// non-positive timeout, so a slow receiver cannot stall a reconcile.
const DefaultTimeout = 10 * time.Second

// maxResponseHeaderBytes limits how much header data a receiver can make us
// buffer.
const maxResponseHeaderBytes = 64 << 10

// BlockedError reports that the dialer refused to connect because the
// resolved destination address is not allowed by the Policy. It is permanent.
type BlockedError struct {
	// Addr is the address the connection would have gone to.
	Addr netip.Addr
}

func (e *BlockedError) Error() string {
	if !e.Addr.IsValid() {
		return "blocked: destination is not allowed"
	}
	return "blocked: destination " + e.Addr.String() + " is not allowed"
}

// Permanent reports true: retrying cannot make a forbidden address allowed.
func (e *BlockedError) Permanent() bool { return true }

// Client returns an *http.Client for delivering callbacks under this policy.
//
// The dialer checks every address at connect time (net.Dialer.Control runs
// after DNS resolution, once per connection attempt), so DNS rebinding,
// numeric host tricks and IPv4-mapped forms cannot bypass the policy.
// Proxies from the environment are ignored (a proxy would make the checked
// address the proxy's, not the receiver's). Redirects are not followed: the
// 3xx response is returned as is and Deliver reports it as a permanent
// error, which is simpler to reason about than re-validating each hop.
// timeout bounds the whole request including reading the response; a
// non-positive value means DefaultTimeout.
//
// Create one client per policy and reuse it: it owns a connection pool.
func (p Policy) Client(timeout time.Duration) *http.Client {
	return p.newClient(timeout, nil)
}

// newClient is Client with an injectable resolver, so tests can exercise
// name resolution without sending DNS queries off the machine.
func (p Policy) newClient(timeout time.Duration, resolver *net.Resolver) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Resolver:  resolver,
		Control:   p.dialControl,
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// dialControl runs after resolution with the literal address about to be
// connected to; rejecting here is what makes the policy binding.
func (p Policy) dialControl(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return errors.New("blocked: network " + network + " is not allowed")
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &BlockedError{}
	}
	if !p.Allowed(ap.Addr()) {
		return &BlockedError{Addr: ap.Addr().WithZone("")}
	}
	return nil
}
