// Package mxdns resolves the mail exchangers of a domain (RFC 5321 §5.1,
// RFC 7505) through a recursive DNS resolver, with a bounded TTL-honouring
// cache and request coalescing.
//
// A Resolver is safe for concurrent use. Lookups of a cached domain do not
// allocate and take well under a microsecond; N concurrent lookups of one
// uncached domain send a single set of DNS queries (singleflight).
package mxdns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"

	"github.com/emaildata/emaildata/internal/platform/durhist"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Status is the outcome of a Lookup.
type Status uint8

const (
	// OK: the domain has at least one mail exchanger with an address
	// (explicit MX, or the implicit MX of RFC 5321 §5.1).
	OK Status = iota
	// NXDomain: the domain does not exist (NXDOMAIN), or is not a valid
	// domain name.
	NXDomain
	// NullMX: the domain publishes a null MX (RFC 7505) and accepts no mail.
	NullMX
	// NoAddress: the domain exists but neither its MX hosts nor (without MX)
	// the domain itself resolve to any A/AAAA address.
	NoAddress
	// ServFail: the resolver answered SERVFAIL/REFUSED or could not be
	// reached. Temporary.
	ServFail
	// Timeout: the resolver did not answer in time, or the caller's context
	// ended. Temporary.
	Timeout
)

var statusNames = [...]string{
	OK:        "ok",
	NXDomain:  "nxdomain",
	NullMX:    "nullmx",
	NoAddress: "noaddress",
	ServFail:  "servfail",
	Timeout:   "timeout",
}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Temporary reports whether the status is a transient failure (ServFail or
// Timeout) that may resolve itself when retried.
func (s Status) Temporary() bool { return s == ServFail || s == Timeout }

// ErrServerFailure is wrapped by the error of a ServFail result.
var ErrServerFailure = errors.New("mxdns: server failure")

// Error is the error returned by Lookup for temporary failures. Use
// errors.Is(err, context.Canceled/context.DeadlineExceeded) to detect the
// caller's own context ending.
type Error struct {
	Domain string
	Status Status // ServFail or Timeout
	Err    error  // cause: context error, network error, or ErrServerFailure
}

func (e *Error) Error() string {
	return "mxdns: lookup " + e.Domain + ": " + e.Status.String() + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the failure was a timeout (net.Error style).
func (e *Error) Timeout() bool { return e.Status == Timeout }

// Temporary always reports true: every error returned by Lookup is transient.
func (e *Error) Temporary() bool { return true }

// Config configures a Resolver. Zero fields take their defaults.
type Config struct {
	// Server is the recursive resolver, host:port. Default: DefaultServer().
	Server string
	// Timeout bounds each DNS query attempt (default 2s). Within it a UDP
	// query unanswered is sent again, as the server's answer times say
	// (udp.go).
	Timeout time.Duration
	// Attempts is the number of UDP tries per query (default 2). A truncated
	// UDP answer is retried once over TCP.
	Attempts int
	// CacheSize bounds the number of cached domains (default 100_000);
	// least recently used entries are evicted.
	CacheSize int
	// HostCacheSize bounds the cache of MX host addresses
	// (default CacheSize/4, at least 64).
	HostCacheSize int
	// MinTTL and MaxTTL clamp record TTLs (defaults 30s and 1h). A negative
	// MinTTL means no lower bound.
	MinTTL, MaxTTL time.Duration
	// NegativeTTL caps how long NXDOMAIN/NODATA-derived results (NXDomain,
	// NoAddress) are cached; their TTL comes from the SOA in the authority
	// section (min of SOA TTL and SOA MINIMUM), clamped to
	// [MinTTL, NegativeTTL]. It is also used when no SOA is present.
	// Default 5m.
	NegativeTTL time.Duration
	// TempTTL is how long an explicit SERVFAIL/REFUSED answer is cached to
	// avoid hammering (default 5s; negative disables). Timeouts and network
	// errors are never cached.
	TempTTL time.Duration
	// MaxHosts bounds how many MX hosts (lowest preferences first) are
	// resolved and returned per domain (default 10).
	MaxHosts int
	// Dial opens the connections to Server, "udp" and "tcp" (default: a
	// net.Dialer's). Tests give an in-memory network's, so that lookups
	// wait in simulated time (testing/synctest).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Clock times the cache and the retransmissions (default the wall
	// clock). The sockets' read and write deadlines are absolute times on
	// the runtime's own clock (the wall's, or a synctest bubble's), so
	// Clock must be that clock whenever Dial's connections set deadlines.
	Clock clock.Clock
}

func (c *Config) setDefaults() {
	c.Clock = clock.Or(c.Clock)
	if c.Server == "" {
		c.Server = DefaultServer()
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.Attempts <= 0 {
		c.Attempts = 2
	}
	if c.CacheSize <= 0 {
		c.CacheSize = 100_000
	}
	if c.HostCacheSize <= 0 {
		c.HostCacheSize = max(c.CacheSize/4, 64)
	}
	switch {
	case c.MinTTL == 0:
		c.MinTTL = 30 * time.Second
	case c.MinTTL < 0:
		c.MinTTL = 0
	}
	if c.MaxTTL <= 0 {
		c.MaxTTL = time.Hour
	}
	if c.MaxTTL < c.MinTTL {
		c.MaxTTL = c.MinTTL
	}
	if c.NegativeTTL <= 0 {
		c.NegativeTTL = 5 * time.Minute
	}
	if c.NegativeTTL < c.MinTTL {
		c.NegativeTTL = c.MinTTL
	}
	switch {
	case c.TempTTL == 0:
		c.TempTTL = 5 * time.Second
	case c.TempTTL < 0:
		c.TempTTL = 0
	}
	if c.MaxHosts <= 0 {
		c.MaxHosts = 10
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = d.DialContext
	}
}

// DefaultServer returns the first nameserver of /etc/resolv.conf as
// host:port, or "127.0.0.1:53". It only reads the file.
func DefaultServer() string {
	return defaultServerFrom("/etc/resolv.conf")
}

func defaultServerFrom(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "127.0.0.1:53"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		host := fields[1]
		if i := strings.IndexByte(host, '%'); i >= 0 { // fe80::1%eth0
			if _, err := netip.ParseAddr(host[:i]); err != nil {
				continue
			}
		} else if _, err := netip.ParseAddr(host); err != nil {
			continue
		}
		return net.JoinHostPort(host, "53")
	}
	return "127.0.0.1:53"
}

// MXHost is one mail exchanger with its addresses (A and AAAA, IPv4 first,
// sorted and de-duplicated). For an implicit MX, Host is the domain and Pref 0.
type MXHost struct {
	Host  string
	Pref  uint16
	Addrs []netip.Addr
}

// Result is the outcome of a Lookup. Results (including the MX and Addrs
// slices) may be shared with the cache and other callers: treat them as
// read-only.
type Result struct {
	Domain   string // ASCII, lower-case, no trailing dot
	Status   Status
	MX       []MXHost // Status OK only; by preference, then host name
	Implicit bool     // MX is the implicit MX (no MX record; domain has A/AAAA)
	// TTL is how long the result stays cached (remaining time for a cache
	// hit); 0 for results that are not cached.
	TTL time.Duration
}

// Stats are cumulative counters of a Resolver.
type Stats struct {
	Lookups      uint64 // Lookup calls
	CacheHits    uint64 // Lookups answered from the cache
	Resolutions  uint64 // cache misses actually resolved (after coalescing)
	Queries      uint64 // DNS messages sent, UDP and TCP, retries and copies included
	Retransmits  uint64 // copies of a UDP query sent within an attempt (udp.go)
	TCPFallbacks uint64 // truncated UDP answers retried over TCP
	Timeouts     uint64 // query attempts that timed out
	Evictions    uint64 // entries evicted by the size bound
	// ResolveTime is the wall time spent in resolutions (the mean
	// latency of a cache miss is ResolveTime / Resolutions).
	ResolveTime time.Duration
	// ResolveLatency is the distribution of resolution times.
	ResolveLatency durhist.Snapshot
	CacheSize      int // domains currently cached (expired ones included until touched)
	HostCacheSize  int // MX host names currently cached
}

// Counters names the cumulative counters for reports and metrics
// (workers' shard summaries; the manager adds them up).
func (s Stats) Counters() map[string]float64 {
	m := map[string]float64{
		"dns_lookups":            float64(s.Lookups),
		"dns_cache_hits":         float64(s.CacheHits),
		"dns_queries":            float64(s.Queries),
		"dns_timeouts":           float64(s.Timeouts),
		"dns_retransmits":        float64(s.Retransmits),
		"dns_resolutions":        float64(s.Resolutions),
		"dns_resolution_seconds": s.ResolveTime.Seconds(),
	}
	s.ResolveLatency.AddCounters(m, ResolutionDurationKey)
	return m
}

// ResolutionDurationKey names the resolution latency histogram in Counters.
const ResolutionDurationKey = "dns_resolution_duration_seconds"

// resolveBounds span a cached resolver's answer to a query that waits out
// its retries.
var resolveBounds = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Resolver resolves and caches mail exchangers. Create it with New.
type Resolver struct {
	cfg   Config
	tcp   *dns.Client
	now   func() time.Time
	flt   singleflight.Group // domain lookups
	hflt  singleflight.Group // host address lookups
	mu    sync.Mutex
	cache *lru[Result]
	hosts *lru[hostAddrs]

	lookups, hits, resolutions, queries, tcpFallbacks, timeouts, retransmits atomic.Uint64
	resolveNs                                                                atomic.Int64
	resolveHist                                                              *durhist.Histogram
	rtt                                                                      rttEstimator

	connMu sync.Mutex
	idle   []*dns.Conn // pooled UDP sockets to the server
}

// New returns a Resolver for cfg. It sends nothing until the first Lookup.
func New(cfg Config) *Resolver {
	cfg.setDefaults()
	return &Resolver{
		cfg:   cfg,
		tcp:   &dns.Client{Net: "tcp", Timeout: cfg.Timeout},
		now:   cfg.Clock.Now,
		cache: newLRU[Result](cfg.CacheSize),
		hosts: newLRU[hostAddrs](cfg.HostCacheSize),

		resolveHist: durhist.New(resolveBounds...),
	}
}

// Config returns the effective configuration (defaults applied).
func (r *Resolver) Config() Config { return r.cfg }

// Stats returns a snapshot of the counters.
func (r *Resolver) Stats() Stats {
	r.mu.Lock()
	cs, hs, ev := r.cache.len(), r.hosts.len(), r.cache.evictions+r.hosts.evictions
	r.mu.Unlock()
	return Stats{
		Lookups:        r.lookups.Load(),
		CacheHits:      r.hits.Load(),
		Resolutions:    r.resolutions.Load(),
		Queries:        r.queries.Load(),
		TCPFallbacks:   r.tcpFallbacks.Load(),
		Timeouts:       r.timeouts.Load(),
		Retransmits:    r.retransmits.Load(),
		Evictions:      ev,
		ResolveTime:    time.Duration(r.resolveNs.Load()),
		ResolveLatency: r.resolveHist.Snapshot(),
		CacheSize:      cs,
		HostCacheSize:  hs,
	}
}

// Flush empties both caches.
func (r *Resolver) Flush() {
	r.mu.Lock()
	r.cache.clear()
	r.hosts.clear()
	r.mu.Unlock()
}

// Lookup returns the mail exchangers of domain (any case, optional trailing
// dot, U-labels are converted to A-labels).
//
// The error is non-nil exactly when Result.Status is temporary (ServFail or
// Timeout); it is an *Error and wraps the caller's context error when ctx
// ended first. Permanent outcomes (OK, NXDomain, NullMX, NoAddress) return a
// nil error. A syntactically invalid domain yields NXDomain without any query.
//
// Timeouts are not cached; explicit SERVFAIL answers are cached for
// Config.TempTTL. If ctx ends while a resolution is in flight, Lookup
// returns at once but the resolution completes in the background (bounded by
// the query timeouts) and fills the cache for later callers.
func (r *Resolver) Lookup(ctx context.Context, domain string) (Result, error) {
	r.lookups.Add(1)
	name, ok := normalize(domain)
	if !ok {
		return Result{Domain: name, Status: NXDomain}, nil
	}
	now := r.now()
	r.mu.Lock()
	res, exp, hit := r.cache.get(name, now)
	r.mu.Unlock()
	if hit {
		r.hits.Add(1)
		res.TTL = exp.Sub(now)
		if res.Status.Temporary() {
			return res, &Error{Domain: name, Status: res.Status, Err: ErrServerFailure}
		}
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return Result{Domain: name, Status: Timeout}, &Error{Domain: name, Status: Timeout, Err: err}
	}
	ch := r.flt.DoChan(name, func() (any, error) {
		// A flight that finished between our cache miss and this call has
		// already stored the answer: use it rather than query again.
		r.mu.Lock()
		res, exp, hit := r.cache.get(name, r.now())
		r.mu.Unlock()
		if hit && !res.Status.Temporary() {
			res.TTL = exp.Sub(r.now())
			return flightResult{res, nil}, nil
		}
		r.resolutions.Add(1)
		// Detach from the caller: other callers share this flight.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.flightBudget())
		defer cancel()
		start := r.cfg.Clock.Now() // not r.now: tests move that clock
		res, err := r.resolve(fctx, name)
		took := r.cfg.Clock.Since(start)
		r.resolveNs.Add(int64(took))
		r.resolveHist.Observe(took)
		return flightResult{res, err}, nil
	})
	select {
	case <-ctx.Done():
		return Result{Domain: name, Status: Timeout}, &Error{Domain: name, Status: Timeout, Err: ctx.Err()}
	case v := <-ch:
		fr := v.Val.(flightResult)
		return fr.res, fr.err
	}
}

type flightResult struct {
	res Result
	err error
}

// flightBudget bounds one resolution: the MX query, then the host address
// queries (run in parallel), each possibly following a CNAME hop.
func (r *Resolver) flightBudget() time.Duration {
	return 4 * time.Duration(r.cfg.Attempts+1) * r.cfg.Timeout
}

func (r *Resolver) resolve(ctx context.Context, name string) (Result, error) {
	mx, err := r.query(ctx, name, dns.TypeMX)
	if err != nil {
		return r.temporary(name, err)
	}
	if mx.nx {
		return r.store(Result{Domain: name, Status: NXDomain, TTL: r.negTTL(mx.ttl)}), nil
	}
	if len(mx.rrs) == 0 { // NODATA: implicit MX (RFC 5321 §5.1)
		return r.implicitMX(ctx, name, mx.ttl)
	}
	hosts := mxHosts(mx.rrs)
	if len(hosts) == 0 {
		return r.store(Result{Domain: name, Status: NullMX, TTL: r.posTTL(mx.ttl)}), nil
	}
	sortHosts(hosts)
	if len(hosts) > r.cfg.MaxHosts {
		hosts = hosts[:r.cfg.MaxHosts]
	}
	outs := r.lookupHosts(ctx, hosts)

	ttl := mx.ttl
	var firstErr error
	partial := false
	kept := hosts[:0]
	for i := range hosts {
		o := outs[i]
		if o.err != nil {
			partial = true
			if firstErr == nil {
				firstErr = o.err
			}
			continue
		}
		ttl = min(ttl, o.ha.ttl)
		partial = partial || o.ha.partial
		if len(o.ha.addrs) > 0 {
			hosts[i].Addrs = o.ha.addrs
			kept = append(kept, hosts[i])
		}
	}
	if len(kept) == 0 {
		if firstErr != nil {
			return r.temporary(name, firstErr)
		}
		return r.store(Result{Domain: name, Status: NoAddress, TTL: r.negTTL(ttl)}), nil
	}
	res := Result{Domain: name, Status: OK, MX: kept, TTL: r.posTTL(ttl)}
	if partial { // some host failed temporarily: re-resolve soon
		res.TTL = min(res.TTL, r.tempTTL())
	}
	return r.store(res), nil
}

// implicitMX resolves a domain without MX records as its own mail host.
func (r *Resolver) implicitMX(ctx context.Context, name string, mxTTL uint32) (Result, error) {
	ha, err := r.hostLookup(ctx, name)
	if err != nil {
		return r.temporary(name, err)
	}
	if len(ha.addrs) == 0 {
		return r.store(Result{Domain: name, Status: NoAddress, TTL: r.negTTL(min(mxTTL, ha.ttl))}), nil
	}
	res := Result{
		Domain:   name,
		Status:   OK,
		Implicit: true,
		MX:       []MXHost{{Host: name, Pref: 0, Addrs: ha.addrs}},
		TTL:      r.posTTL(min(mxTTL, ha.ttl)),
	}
	if ha.partial {
		res.TTL = min(res.TTL, r.tempTTL())
	}
	return r.store(res), nil
}

// mxHosts lists the MX targets once each, at their best preference,
// without null MX targets.
func mxHosts(rrs []dns.RR) []MXHost {
	hosts := make([]MXHost, 0, len(rrs))
	for _, rr := range rrs {
		m := rr.(*dns.MX)
		h := strings.ToLower(strings.TrimSuffix(m.Mx, "."))
		if h == "" { // "." target: null MX (RFC 7505)
			continue
		}
		dup := false
		for i := range hosts {
			if hosts[i].Host == h {
				hosts[i].Pref = min(hosts[i].Pref, m.Preference)
				dup = true
				break
			}
		}
		if !dup {
			hosts = append(hosts, MXHost{Host: h, Pref: m.Preference})
		}
	}
	return hosts
}

// hostOut is one MX host's address lookup.
type hostOut struct {
	ha  hostAddrs
	err error
}

// lookupHosts looks up the hosts' addresses at once, the last one on the
// calling goroutine.
func (r *Resolver) lookupHosts(ctx context.Context, hosts []MXHost) []hostOut {
	outs := make([]hostOut, len(hosts))
	var wg sync.WaitGroup
	for i := range hosts {
		if i == len(hosts)-1 {
			outs[i].ha, outs[i].err = r.hostLookup(ctx, hosts[i].Host)
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			outs[i].ha, outs[i].err = r.hostLookup(ctx, hosts[i].Host)
		}(i)
	}
	wg.Wait()
	return outs
}

// tempTTL is the cache lifetime of results built on partial failures.
func (r *Resolver) tempTTL() time.Duration {
	if r.cfg.TempTTL > 0 {
		return r.cfg.TempTTL
	}
	return time.Second
}

// temporary turns a query error into a temporary result; explicit SERVFAIL
// answers and CNAME loops are cached for TempTTL, timeouts and network
// errors are not.
func (r *Resolver) temporary(name string, err error) (Result, error) {
	st := ServFail
	if isTimeout(err) {
		st = Timeout
	}
	res := Result{Domain: name, Status: st}
	var rc *rcodeError
	if st == ServFail && (errors.As(err, &rc) || errors.Is(err, errCNAMELoop)) && r.cfg.TempTTL > 0 {
		res.TTL = r.cfg.TempTTL
		r.store(res)
	}
	return res, &Error{Domain: name, Status: st, Err: err}
}

func (r *Resolver) store(res Result) Result {
	if res.TTL <= 0 {
		return res
	}
	exp := r.now().Add(res.TTL)
	r.mu.Lock()
	r.cache.put(res.Domain, res, exp)
	r.mu.Unlock()
	return res
}

func (r *Resolver) posTTL(ttl uint32) time.Duration {
	return clamp(time.Duration(ttl)*time.Second, r.cfg.MinTTL, r.cfg.MaxTTL)
}

func (r *Resolver) negTTL(ttl uint32) time.Duration {
	return clamp(time.Duration(ttl)*time.Second, r.cfg.MinTTL, min(r.cfg.MaxTTL, r.cfg.NegativeTTL))
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return max(lo, min(d, hi))
}

// hostAddrs is the (cached) outcome of resolving one host name.
type hostAddrs struct {
	addrs   []netip.Addr
	ttl     uint32 // seconds; for empty addrs, the negative TTL
	partial bool   // one of A/AAAA failed temporarily
}

// hostLookup resolves A and AAAA of host, through the host cache.
func (r *Resolver) hostLookup(ctx context.Context, host string) (hostAddrs, error) {
	now := r.now()
	r.mu.Lock()
	ha, exp, hit := r.hosts.get(host, now)
	r.mu.Unlock()
	if hit {
		rem := exp.Sub(now)
		ha.ttl = uint32(max(rem/time.Second, 0))
		return ha, nil
	}
	v, err, _ := r.hflt.Do(host, func() (any, error) {
		ha, err := r.resolveHost(ctx, host)
		if err == nil {
			var d time.Duration
			if len(ha.addrs) == 0 {
				d = r.negTTL(ha.ttl)
			} else {
				d = r.posTTL(ha.ttl)
			}
			if ha.partial {
				d = min(d, r.tempTTL())
			}
			r.mu.Lock()
			r.hosts.put(host, ha, r.now().Add(d))
			r.mu.Unlock()
		}
		return ha, err
	})
	if err != nil {
		return hostAddrs{}, err
	}
	return v.(hostAddrs), nil
}

func (r *Resolver) resolveHost(ctx context.Context, host string) (hostAddrs, error) {
	var six answer
	var sixErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		six, sixErr = r.query(ctx, host, dns.TypeAAAA)
	}()
	four, fourErr := r.query(ctx, host, dns.TypeA)
	<-done

	// The TTL is that of the addresses found; the negative TTL only when
	// neither family has any (a missing AAAA must not shorten the caching
	// of an A-only host).
	var out hostAddrs
	posTTL, negTTL := ^uint32(0), ^uint32(0)
	for _, a := range []struct {
		ans answer
		err error
	}{{four, fourErr}, {six, sixErr}} {
		if a.err != nil {
			out.partial = true
			continue
		}
		if len(a.ans.rrs) == 0 {
			negTTL = min(negTTL, a.ans.ttl)
		} else {
			posTTL = min(posTTL, a.ans.ttl)
		}
		for _, rr := range a.ans.rrs {
			var ip netip.Addr
			switch v := rr.(type) {
			case *dns.A:
				ip, _ = netip.AddrFromSlice(v.A.To4())
			case *dns.AAAA:
				ip, _ = netip.AddrFromSlice(v.AAAA.To16())
			}
			if ip.IsValid() {
				out.addrs = append(out.addrs, ip.Unmap())
			}
		}
	}
	if fourErr != nil && sixErr != nil {
		return hostAddrs{}, fourErr
	}
	if len(out.addrs) == 0 && out.partial {
		// One family failed and the other has nothing: we cannot tell.
		if fourErr != nil {
			return hostAddrs{}, fourErr
		}
		return hostAddrs{}, sixErr
	}
	out.ttl = posTTL
	if len(out.addrs) == 0 {
		out.ttl = negTTL
	}
	out.addrs = sortAddrs(out.addrs)
	return out, nil
}

func sortAddrs(a []netip.Addr) []netip.Addr {
	// insertion sort: tiny slices
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].Less(a[j-1]); j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	out := a[:0]
	for i, x := range a {
		if i == 0 || x != a[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func sortHosts(h []MXHost) {
	less := func(a, b MXHost) bool {
		if a.Pref != b.Pref {
			return a.Pref < b.Pref
		}
		return a.Host < b.Host
	}
	for i := 1; i < len(h); i++ {
		for j := i; j > 0 && less(h[j], h[j-1]); j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
}
