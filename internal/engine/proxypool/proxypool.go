// Package proxypool dials TCP connections through a pool of SOCKS5 proxies
// (RFC 1928, with RFC 1929 username/password), for SMTP probes from
// clusters whose provider blocks outbound port 25.
//
// Connections go to the proxies in turn, at most Config.MaxConnsPerProxy
// open through each. A proxy that cannot be reached, refuses our
// credentials or fails on its own side is set aside (5 s, doubling up to a
// minute) and the dial fails over to the next one; a destination that the
// proxy reports refused or unreachable is the destination's answer and is
// returned as such (wrapping syscall.ECONNREFUSED, EHOSTUNREACH or
// ENETUNREACH). A connection whose session breaks can ask whether its proxy
// died (ProxyLost), so the caller does not blame the mail server.
//
// The pool dials what it is given: callers check destinations (the SSRF
// guard) before dialling.
package proxypool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/proxy"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Config configures a Pool.
type Config struct {
	// URLs are the proxies: socks5://[user:password@]host:port.
	URLs []string
	// MaxConnsPerProxy bounds the connections open through one proxy
	// (default 100).
	MaxConnsPerProxy int
	// Forward reaches the proxies themselves (default: a net.Dialer).
	Forward func(ctx context.Context, network, addr string) (net.Conn, error)
	// Backoff is how long a failed proxy is first set aside (default 5s;
	// it doubles on each failure in a row, up to a minute).
	Backoff time.Duration
	// Clock times the backoffs (default the wall clock).
	Clock clock.Clock
}

// ErrNoProxy: every proxy is set aside after failures.
var ErrNoProxy = errors.New("proxypool: no proxy available")

// Pool dials through SOCKS5 proxies. It is safe for concurrent use.
type Pool struct {
	cfg     Config
	proxies []*socksProxy
	next    atomic.Uint64

	dials, failovers, lost atomic.Uint64
}

type socksProxy struct {
	name   string // host:port, no credentials
	dialer proxy.ContextDialer
	slots  chan struct{}
	pool   *Pool

	mu        sync.Mutex
	downUntil time.Time
	failures  int // in a row
	lastErr   error
}

// New parses the proxy URLs.
func New(cfg Config) (*Pool, error) {
	if cfg.MaxConnsPerProxy <= 0 {
		cfg.MaxConnsPerProxy = 100
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 5 * time.Second
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Forward == nil {
		var d net.Dialer
		cfg.Forward = d.DialContext
	}
	if len(cfg.URLs) == 0 {
		return nil, errors.New("proxypool: no proxy URL")
	}
	p := &Pool{cfg: cfg}
	for _, raw := range cfg.URLs {
		px, err := p.parse(raw)
		if err != nil {
			return nil, err
		}
		p.proxies = append(p.proxies, px)
	}
	return p, nil
}

func (p *Pool) parse(raw string) (*socksProxy, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme != "socks5" || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("proxypool: %q: want socks5://[user:password@]host:port", redact(raw))
	}
	var auth *proxy.Auth
	if u.User != nil {
		pw, _ := u.User.Password()
		auth = &proxy.Auth{User: u.User.Username(), Password: pw}
	}
	px := &socksProxy{name: u.Host, slots: make(chan struct{}, p.cfg.MaxConnsPerProxy), pool: p}
	d, err := proxy.SOCKS5("tcp", u.Host, auth, forward(p.cfg.Forward))
	if err != nil {
		return nil, fmt.Errorf("proxypool: %s: %w", u.Host, err)
	}
	px.dialer = d.(proxy.ContextDialer)
	return px, nil
}

// redact drops credentials from a proxy URL for messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		u.User = url.User("xxx")
		return u.String()
	}
	if at := strings.LastIndexByte(raw, '@'); at >= 0 {
		return "…" + raw[at:]
	}
	return raw
}

// forward marks failures to reach the proxy itself.
type forward func(ctx context.Context, network, addr string) (net.Conn, error)

func (f forward) Dial(network, addr string) (net.Conn, error) {
	return f.DialContext(context.Background(), network, addr)
}

func (f forward) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f(ctx, network, addr)
	if err != nil {
		return nil, &unreachableProxy{err}
	}
	return c, nil
}

type unreachableProxy struct{ err error }

func (e *unreachableProxy) Error() string { return "proxy unreachable: " + e.err.Error() }
func (e *unreachableProxy) Unwrap() error { return e.err }

// Stats are the pool's counters.
type Stats struct {
	Dials     uint64 // connections asked for
	Failovers uint64 // dials moved to another proxy after one failed
	Lost      uint64 // sessions whose proxy was found dead mid-way
	Down      int    // proxies set aside now
}

// Stats returns a snapshot.
func (p *Pool) Stats() Stats {
	st := Stats{Dials: p.dials.Load(), Failovers: p.failovers.Load(), Lost: p.lost.Load()}
	now := p.cfg.Clock.Now()
	for _, px := range p.proxies {
		if px.isDown(now) {
			st.Down++
		}
	}
	return st
}

// Dial connects to addr through the next healthy proxy with a free slot,
// failing over to the others when a proxy fails.
func (p *Pool) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.dials.Add(1)
	n := len(p.proxies)
	start := int(p.next.Add(1) % uint64(n))
	var lastErr error
	var busy *socksProxy
	for i := range n {
		px := p.proxies[(start+i)%n]
		if px.isDown(p.cfg.Clock.Now()) {
			lastErr = px.err()
			continue
		}
		select {
		case px.slots <- struct{}{}:
		default:
			if busy == nil {
				busy = px
			}
			continue
		}
		c, err, proxyFault := px.dial(ctx, network, addr)
		if !proxyFault {
			return c, err
		}
		lastErr = err
		p.failovers.Add(1)
	}
	if busy != nil {
		// Every healthy proxy is full: wait for a slot on one.
		select {
		case busy.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c, err, _ := busy.dial(ctx, network, addr)
		return c, err
	}
	return nil, fmt.Errorf("%w: last: %w", ErrNoProxy, lastErr)
}

// ErrProxyFailed wraps a failure of the proxy itself on a Route's dial
// (unreachable, credentials refused, its own error): the proxy is set
// aside, and the destination is not to blame.
var ErrProxyFailed = errors.New("proxypool: proxy failed")

// Route is one proxy chosen before dialling, so that the caller can count
// its connections per proxy (its egress identity) before it dials.
type Route struct{ px *socksProxy }

// Name is the proxy's identity: socks5://host:port, no credentials.
func (r Route) Name() string { return "socks5://" + r.px.name }

// Dial connects to addr through this proxy only, waiting for one of its
// slots. A failure of the proxy itself wraps ErrProxyFailed: pick another
// route.
func (r Route) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	px := r.px
	px.pool.dials.Add(1)
	select {
	case px.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c, err, proxyFault := px.dial(ctx, network, addr)
	if proxyFault {
		px.pool.failovers.Add(1)
		return nil, fmt.Errorf("%w: %w", ErrProxyFailed, err)
	}
	return c, err
}

// Pick chooses the next healthy proxy in turn, preferring one with a free
// slot; ErrNoProxy when every proxy is set aside.
func (p *Pool) Pick() (Route, error) { return p.PickFor(nil) }

// PickFor is Pick preferring the proxies whose Route.Name prefer accepts
// (nil: all), before those with a free slot: a mail host that slows a
// client address once it sent unknown recipients gets its work through
// the proxies whose reputation there is clean. With none preferred and
// healthy, it picks as Pick does.
func (p *Pool) PickFor(prefer func(name string) bool) (Route, error) {
	n := len(p.proxies)
	start := int(p.next.Add(1) % uint64(n))
	now := p.cfg.Clock.Now()
	// best ranks a healthy proxy: preferred first, then a free slot.
	var best *socksProxy
	bestRank := -1
	var lastErr error
	for i := range n {
		px := p.proxies[(start+i)%n]
		if px.isDown(now) {
			lastErr = px.err()
			continue
		}
		rank := 0
		if prefer == nil || prefer(Route{px}.Name()) {
			rank += 2
		}
		if len(px.slots) < cap(px.slots) {
			rank++
		}
		if rank > bestRank {
			best, bestRank = px, rank
		}
	}
	if best != nil {
		return Route{best}, nil
	}
	return Route{}, fmt.Errorf("%w: last: %w", ErrNoProxy, lastErr)
}

// dial dials through px, whose slot the caller holds. proxyFault reports a
// failure of the proxy itself (px is then set aside).
func (px *socksProxy) dial(ctx context.Context, network, addr string) (c net.Conn, err error, proxyFault bool) {
	c, err = px.dialer.DialContext(ctx, network, addr)
	if err == nil {
		px.ok()
		return &Conn{Conn: c, px: px}, nil, false
	}
	<-px.slots
	if ctx.Err() != nil {
		return nil, err, false
	}
	if dst := destinationError(err); dst != nil {
		px.ok()
		return nil, fmt.Errorf("%w (via proxy %s): %w", dst, px.name, err), false
	}
	px.fail(err)
	return nil, fmt.Errorf("proxy %s: %w", px.name, err), true
}

// destinationError maps a SOCKS reply about the destination to the
// matching errno, or nil when the failure is the proxy's.
func destinationError(err error) error {
	var up *unreachableProxy
	if errors.As(err, &up) {
		return nil
	}
	msg := err.Error()
	for text, errno := range map[string]error{
		"connection refused":  syscall.ECONNREFUSED,
		"host unreachable":    syscall.EHOSTUNREACH,
		"network unreachable": syscall.ENETUNREACH,
		"TTL expired":         syscall.ETIMEDOUT,
	} {
		if strings.HasSuffix(msg, "unknown error "+text) {
			return errno
		}
	}
	return nil
}

func (px *socksProxy) isDown(now time.Time) bool {
	px.mu.Lock()
	defer px.mu.Unlock()
	return now.Before(px.downUntil)
}

func (px *socksProxy) err() error {
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.lastErr
}

func (px *socksProxy) ok() {
	px.mu.Lock()
	px.failures, px.lastErr = 0, nil
	px.mu.Unlock()
}

func (px *socksProxy) fail(err error) {
	px.mu.Lock()
	defer px.mu.Unlock()
	backoff := px.pool.cfg.Backoff << min(px.failures, 4)
	px.failures++
	px.lastErr = fmt.Errorf("proxy %s: %w", px.name, err)
	px.downUntil = px.pool.cfg.Clock.Now().Add(min(backoff, time.Minute))
}

// Conn is a connection through a proxy.
type Conn struct {
	net.Conn
	px   *socksProxy
	once sync.Once
}

// Close closes the connection and frees its slot on the proxy.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.px.slots })
	return err
}

// ProxyLost reports whether the proxy is gone (set aside, or unreachable
// now): a session that broke on such a connection says nothing about the
// destination.
func (c *Conn) ProxyLost() bool {
	px := c.px
	if px.isDown(c.px.pool.cfg.Clock.Now()) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	probe, err := px.pool.cfg.Forward(ctx, "tcp", px.name)
	if err != nil {
		px.fail(err)
		px.pool.lost.Add(1)
		return true
	}
	probe.Close()
	return false
}
