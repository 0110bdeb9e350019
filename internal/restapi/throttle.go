package restapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// ThrottleConfig bounds what one client address, key or tenant can take of
// the API beyond its rate limit: the connections its request bodies hold
// (their pace, and how many at once) and the key checks it may fail. A zero
// field takes DefaultThrottle's value; a negative one turns that check off.
type ThrottleConfig struct {
	// BodyMinRate is the slowest pace, in bytes a second, at which a request
	// body may arrive. A body that falls behind it for BodyStall is cut with
	// 408: a client sending 1 byte every 10 s holds a connection for
	// BodyStall, not forever.
	BodyMinRate int64
	// BodyStall is the time a request body may fall behind BodyMinRate: its
	// first bytes must arrive within it, and a body arriving faster than
	// BodyMinRate banks at most this much time for later pauses. The read
	// deadline grows with each byte received, so a slow link that keeps the
	// pace may send a body of any length.
	BodyStall time.Duration
	// UploadsPerKey and UploadsPerTenant bound the request bodies (list and
	// feedback files, bulk bodies, purchases) one key and one tenant may be
	// sending at once; past them a new one is refused with 429. A body
	// counts until it has arrived or the server answers.
	UploadsPerKey    int
	UploadsPerTenant int
	// AuthFailureRate and AuthFailureBurst bound the failed key checks (a
	// key that does not exist) from one client address: AuthFailureBurst at
	// once, then AuthFailureRate a second. Past them the address's requests
	// are refused with 429 and Retry-After without their key being looked
	// up, so guessing is slowed to that rate; a key presented from another
	// address is unaffected, so an attacker cannot lock a real key out.
	AuthFailureRate  float64
	AuthFailureBurst int
	// ForbiddenRate and ForbiddenBurst bound one tenant's calls refused with
	// 403 (a key not enabled for the service): past them such calls get 429;
	// the tenant's allowed calls are unaffected.
	ForbiddenRate  float64
	ForbiddenBurst int
	// TrackedAddresses bounds the client addresses (IPv6: /64 prefixes) and
	// tenants whose failures are remembered, each, so that an attacker with
	// many addresses cannot exhaust memory: past it the least recently
	// failing one is forgotten.
	TrackedAddresses int
	// TrustedProxies are the proxies (CIDRs) whose X-Forwarded-For header
	// names the client. Empty: the TCP peer is the client, and the header is
	// ignored (anyone could write it).
	TrustedProxies []netip.Prefix
}

// DefaultThrottle returns the defaults of ThrottleConfig.
func DefaultThrottle() ThrottleConfig {
	return ThrottleConfig{
		BodyMinRate:      1024,
		BodyStall:        30 * time.Second,
		UploadsPerKey:    8,
		UploadsPerTenant: 16,
		AuthFailureRate:  0.5,
		AuthFailureBurst: 20,
		ForbiddenRate:    1,
		ForbiddenBurst:   30,
		TrackedAddresses: 100_000,
	}
}

// withDefaults fills zero fields from DefaultThrottle.
func (c ThrottleConfig) withDefaults() ThrottleConfig {
	d := DefaultThrottle()
	fill := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	fillInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	fillF := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&c.BodyMinRate, d.BodyMinRate)
	if c.BodyStall == 0 {
		c.BodyStall = d.BodyStall
	}
	fillInt(&c.UploadsPerKey, d.UploadsPerKey)
	fillInt(&c.UploadsPerTenant, d.UploadsPerTenant)
	fillF(&c.AuthFailureRate, d.AuthFailureRate)
	fillInt(&c.AuthFailureBurst, d.AuthFailureBurst)
	fillF(&c.ForbiddenRate, d.ForbiddenRate)
	fillInt(&c.ForbiddenBurst, d.ForbiddenBurst)
	fillInt(&c.TrackedAddresses, d.TrackedAddresses)
	return c
}

// failures counts failures by a name (a client address, a tenant) in token
// buckets: burst at once, refilled at rate a second. Only names that have
// failed are kept, at most max of them, the least recently failing
// forgotten first; a forgotten name starts again with a full bucket, as one
// whose bucket has refilled would.
type failures[K comparable] struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets *simplelru.LRU[K, *bucket]
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was computed
}

// newFailures returns the counter, or nil (counting nothing) when rate is
// negative.
func newFailures[K comparable](rate float64, burst, max int, now func() time.Time) *failures[K] {
	if rate < 0 || burst <= 0 {
		return nil
	}
	lru, err := simplelru.NewLRU[K, *bucket](max, nil)
	if err != nil {
		panic(err) // max > 0: withDefaults filled it
	}
	return &failures[K]{rate: rate, burst: float64(burst), now: now, buckets: lru}
}

// retryLocked is how long until name has a failure left; 0 when it has one.
func (f *failures[K]) retryLocked(name K, t time.Time) time.Duration {
	b, ok := f.buckets.Peek(name)
	if !ok {
		return 0
	}
	if d := t.Sub(b.at); d > 0 {
		b.tokens = min(f.burst, b.tokens+d.Seconds()*f.rate)
		b.at = t
	}
	if b.tokens >= 1 {
		return 0
	}
	if f.rate == 0 {
		return time.Hour
	}
	return max(time.Second/1000, time.Duration((1-b.tokens)/f.rate*float64(time.Second)))
}

// spendLocked spends one of name's failures, which it has.
func (f *failures[K]) spendLocked(name K, t time.Time) {
	b, ok := f.buckets.Get(name) // Get: the most recently failing is kept longest
	if !ok {
		b = &bucket{tokens: f.burst, at: t}
		f.buckets.Add(name, b)
	}
	b.tokens--
}

// guard runs try for name unless name has no failure left (then retry says
// how long until it has one), and spends one when try fails. try runs
// under the counter's lock, so concurrent requests cannot run more tries
// than the failures left: a guess is never checked past the limit.
func (f *failures[K]) guard(name K, try func() bool) (ok bool, retry time.Duration) {
	if f == nil {
		return try(), 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now()
	if retry := f.retryLocked(name, t); retry > 0 {
		return false, retry
	}
	if ok = try(); !ok {
		f.spendLocked(name, t)
	}
	return ok, 0
}

// fail spends one of name's failures; when none is left it spends nothing
// and says how long until one is.
func (f *failures[K]) fail(name K) (retry time.Duration) {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now()
	if retry := f.retryLocked(name, t); retry > 0 {
		return retry
	}
	f.spendLocked(name, t)
	return 0
}

// len is the number of names remembered.
func (f *failures[K]) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buckets.Len()
}

// clientAddress names the client of r for the failure counts: the TCP peer,
// or, when the peer is a trusted proxy, the last address in
// X-Forwarded-For that is not one. IPv6 clients are counted by /64, the
// smallest network a site is usually given. A peer that is no IP address
// (not served over TCP) is the zero Addr.
func clientAddress(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := parseAddr(r.RemoteAddr)
	if peer.IsValid() && len(trusted) > 0 && isTrusted(peer, trusted) {
		peer = forwardedClient(peer, r.Header.Values("X-Forwarded-For"), trusted)
	}
	if peer.Is6() {
		return netip.PrefixFrom(peer, 64).Masked().Addr()
	}
	return peer
}

// forwardedClient walks X-Forwarded-For from the right (the hop nearest to
// us first) past trusted proxies to the first address that is not one.
// A malformed hop stops the walk: nothing before it can be believed.
func forwardedClient(peer netip.Addr, hops []string, trusted []netip.Prefix) netip.Addr {
	for i := len(hops) - 1; i >= 0; i-- {
		fields := strings.Split(hops[i], ",")
		for j := len(fields) - 1; j >= 0; j-- {
			a := parseAddr(strings.TrimSpace(fields[j]))
			if !a.IsValid() {
				return peer
			}
			peer = a
			if !isTrusted(a, trusted) {
				return peer
			}
		}
	}
	return peer
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr reads "ip", "ip:port" or "[ip]:port"; IPv4-mapped IPv6
// addresses are IPv4.
func parseAddr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.WithZone("").Unmap()
}
