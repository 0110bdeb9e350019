// Package smtpprobe is the SMTP mailbox check of the verification engine:
// it asks a domain's mail exchangers, over SMTP, whether they would accept
// mail for an address (EHLO, MAIL FROM, RCPT TO, RSET ..., QUIT) without
// ever sending DATA, and maps the answer to a verdict.
//
// # Verdicts
//
// The RCPT TO reply decides (see Outcome for the status codes):
//
//   - 2xx: Deliverable, or CatchAll when the domain also accepts a random,
//     clearly non-existent local part (probed once per domain, cached).
//   - 5.1.1 and other X.1.x address errors, 5.2.1 (mailbox disabled: it
//     cannot receive, so it is treated like a missing mailbox), and
//     550/551/553 without an enhanced code: Missing.
//   - 5.2.2, or 552 without an enhanced code: Full.
//   - 5.7.x, 5.1.2 ("not accepted for this domain"), "relay denied"-style
//     texts and 554 at RCPT: Policy.
//   - 4xx (greylisting 450/451, 421, 452 ...): temporary. The address is
//     retried after Config.GreylistRetry, at most Config.MaxGreylistRetries
//     times and only while the caller's deadline leaves room for the wait
//     and one more session; then Unconfirmed with Result.Greylisted set when
//     the reply looked like greylisting.
//   - No RCPT verdict from any MX host (connection refused, dropped
//     connections, tarpits running into the per-step timeouts, 5xx to our
//     own commands): Unconfirmed.
//
// # Unconfirmed versus Timeout
//
// Timeout means the caller's context stopped the probe: ctx was cancelled
// or its deadline passed before a verdict, or waiting for a per-host
// connection slot or rate token could not finish before the deadline.
// Unconfirmed means the probe ran to its own end with ctx still live: every
// MX host was tried (or skipped as recently stalled or unreachable) and
// each failed within the prober's own ConnectTimeout and CommandTimeout, or
// the server only ever answered 4xx. A tarpit is
// therefore Unconfirmed when CommandTimeout (the prober's own budget per
// step) runs out on every host first, and Timeout when ctx's deadline comes
// first; errors.Is(Result.Err, os.ErrDeadlineExceeded) tells a stalled
// server apart in both cases.
//
// # Stalled and unreachable hosts
//
// An MX host address whose connect timed out or was refused, or that sent
// no greeting within CommandTimeout, is remembered for
// Config.HostPenaltyTTL: later probes of any domain skip it and go straight
// to the next MX host, and when every host of a domain is skipped the
// outcome is Unconfirmed at once, with Result.Err wrapping ErrAllHostsFailed,
// ErrHostSkipped and the remembered failure. A host is tried again after
// the TTL, and forgiven as soon as it gets as far as a usable session.
// Failures caused by the caller's context are never held against a host.
//
// # Load on mail servers
//
// Connections are limited per MX host address, across all concurrent
// Probe and ProbeBatch calls of one Prober: at most Config.MaxConnsPerHost
// open at once and Config.RatePerHost new ones per second. ProbeBatch
// checks many addresses of one domain over few sessions, one RCPT per
// transaction with RSET between (never two RCPTs in one transaction: some
// servers answer 452 to the second), reconnecting after
// Config.MaxRcptPerSession recipients.
package smtpprobe

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/mxdns"
	"github.com/emaildata/emaildata/internal/verify"
)

// Config configures a Prober. Zero fields take their defaults.
type Config struct {
	// Port is the SMTP port of the MX hosts (default 25; tests use the mail
	// world's port).
	Port int
	// HELOName is the name sent with EHLO/HELO (default "localhost"; set a
	// real name, e.g. "verify.example.com", in production).
	HELOName string
	// MailFrom is the envelope sender, e.g. "verify@example.com". Empty
	// means the null reverse-path "<>".
	MailFrom string
	// ConnectTimeout bounds each TCP connect (default 5s); CommandTimeout
	// bounds the greeting and each command (or pipelined group of commands)
	// with its reply (default 10s). Both are also cut by ctx's deadline.
	ConnectTimeout, CommandTimeout time.Duration
	// MaxConnsPerHost is the number of concurrent connections per MX host
	// address (default 2).
	MaxConnsPerHost int
	// RatePerHost is the number of new connections per second per MX host
	// address (default 5), with a burst of MaxConnsPerHost.
	RatePerHost float64
	// MaxRcptPerSession is the number of RCPT commands sent in one SMTP
	// session before reconnecting (default 50).
	MaxRcptPerSession int
	// CatchAllCacheTTL is how long a domain's catch-all verdict is cached
	// (default 1h); CatchAllCacheSize bounds the number of cached domains
	// (default 100_000, least recently used evicted).
	CatchAllCacheTTL  time.Duration
	CatchAllCacheSize int
	// GreylistRetry is the delay before retrying an address that got a 4xx
	// (default 60s; tests use a few hundred milliseconds).
	GreylistRetry time.Duration
	// MaxGreylistRetries is the number of such retries per address
	// (default 3; negative: none).
	MaxGreylistRetries int
	// HostPenaltyTTL is how long an MX host address whose connect timed
	// out or was refused, or that sent no greeting within CommandTimeout,
	// is skipped by later probes (default 5m; negative: never skipped).
	// Failures caused by the caller's context do not count.
	// HostPenaltySize bounds the number of remembered addresses (default
	// 10_000, least recently marked evicted).
	HostPenaltyTTL  time.Duration
	HostPenaltySize int
	// Dialer opens connections (default: a net.Dialer). ConnectTimeout is
	// applied through the context.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (c *Config) setDefaults() {
	if c.Port <= 0 {
		c.Port = 25
	}
	if c.HELOName == "" {
		c.HELOName = "localhost"
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = 10 * time.Second
	}
	if c.MaxConnsPerHost <= 0 {
		c.MaxConnsPerHost = 2
	}
	if c.RatePerHost <= 0 {
		c.RatePerHost = 5
	}
	if c.MaxRcptPerSession <= 0 {
		c.MaxRcptPerSession = 50
	}
	if c.CatchAllCacheTTL <= 0 {
		c.CatchAllCacheTTL = time.Hour
	}
	if c.CatchAllCacheSize <= 0 {
		c.CatchAllCacheSize = 100_000
	}
	if c.GreylistRetry <= 0 {
		c.GreylistRetry = 60 * time.Second
	}
	if c.HostPenaltyTTL == 0 {
		c.HostPenaltyTTL = 5 * time.Minute
	}
	if c.HostPenaltySize <= 0 {
		c.HostPenaltySize = 10_000
	}
	switch {
	case c.MaxGreylistRetries == 0:
		c.MaxGreylistRetries = 3
	case c.MaxGreylistRetries < 0:
		c.MaxGreylistRetries = 0
	}
	if c.Dialer == nil {
		var d net.Dialer
		c.Dialer = d.DialContext
	}
}

// Outcome is the verdict of a probe. The zero value is Unconfirmed, so an
// unset Result never reads as deliverable.
type Outcome int

const (
	// Unconfirmed: the domain has mail exchangers but no RCPT verdict could
	// be had (refused, dropped or stalled connections on every MX host,
	// persistent 4xx, greylisting outlasting the retries or the deadline).
	Unconfirmed Outcome = iota
	// Deliverable: RCPT accepted, and the domain rejects random addresses.
	Deliverable
	// CatchAll: RCPT accepted, but the domain accepts any local part (or
	// that could not be ruled out: the random-address probe got no
	// definite answer), so the acceptance proves nothing about the mailbox.
	CatchAll
	// Missing: the mailbox does not exist or is disabled (5.1.1, 5.2.1).
	Missing
	// Full: the mailbox is over quota (552, 5.2.2).
	Full
	// Policy: the server refuses mail for the address or domain by policy
	// (5.7.x, relay denied, 554 at RCPT).
	Policy
	// Timeout: the caller's context ended (or its deadline could not be
	// met) before a verdict.
	Timeout
)

var outcomeNames = [...]string{
	Unconfirmed: "unconfirmed",
	Deliverable: "deliverable",
	CatchAll:    "catchall",
	Missing:     "missing",
	Full:        "full",
	Policy:      "policy",
	Timeout:     "timeout",
}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Code maps the outcome to the engine's status code: Deliverable 50,
// CatchAll 45, Missing 400, Full 410, Policy 420, Unconfirmed 20 (domain OK,
// mailbox unconfirmed), Timeout 5.
func (o Outcome) Code() verify.Code {
	switch o {
	case Deliverable:
		return verify.CodeDeliverable
	case CatchAll:
		return verify.CodeCatchAll
	case Missing:
		return verify.CodeMailboxNotFound
	case Full:
		return verify.CodeMailboxFull
	case Policy:
		return verify.CodeMailNotAccepted
	case Timeout:
		return verify.CodeTimeout
	}
	return verify.CodeValidDomain
}

// Result is the verdict for one address.
type Result struct {
	Outcome Outcome
	// Reply is the last SMTP reply line behind the verdict (for example
	// "550 5.1.1 <a@b.test>: Recipient address rejected: User unknown"); it
	// may contain the address. Empty when no server answered.
	Reply string
	// Host is the MX host name that sent Reply (or was last tried).
	Host string
	// Greylisted: the outcome is Unconfirmed (or Timeout) because a
	// greylisting-style 4xx was never cleared within the retries and the
	// deadline.
	Greylisted bool
	// Err is the network or protocol error behind an Unconfirmed or
	// Timeout outcome without a decisive reply, nil otherwise.
	Err error
}

// Errors reported in Result.Err (wrapped) or by ProbeBatch.
var (
	// ErrNoHosts: the MX list has no host with an address.
	ErrNoHosts = errors.New("smtpprobe: no MX host with an address")
	// ErrBadAddress: the address cannot be put in an RCPT command (no
	// local part or domain, control characters, angle brackets, too long).
	ErrBadAddress = errors.New("smtpprobe: address unusable in RCPT TO")
	// ErrAllHostsFailed: every MX host refused, dropped or stalled.
	ErrAllHostsFailed = errors.New("smtpprobe: all MX hosts failed")
	// ErrHostSkipped: the MX host was not tried because it stalled or was
	// unreachable within the last Config.HostPenaltyTTL; the error also
	// wraps that earlier failure.
	ErrHostSkipped = errors.New("smtpprobe: MX host skipped after a recent failure")
)

// Stats are cumulative counters of a Prober.
type Stats struct {
	Dials          uint64 // connection attempts
	Sessions       uint64 // sessions that reached a usable EHLO/HELO state
	RCPT           uint64 // RCPT commands sent (catch-all probes included)
	RSET           uint64 // RSET commands sent
	CatchAllProbes uint64 // RCPTs for a random local part
	CatchAllCached uint64 // batches that took the catch-all verdict from the cache
	Deferred       uint64 // addresses deferred after a 4xx for a later retry
	HostFailures   uint64 // sessions that failed before any RCPT verdict
	HostsSkipped   uint64 // MX host addresses skipped as recently stalled or unreachable
}

// Prober runs SMTP probes. It is safe for concurrent use; the per-host
// limits, the catch-all cache and the memory of stalled or unreachable
// hosts are shared by all its calls.
type Prober struct {
	cfg       Config
	limits    *hostLimits
	cache     *verdictCache
	penalties *hostPenalties // nil when disabled
	secret    [16]byte
	mailFrom  string // "<...>" reverse path

	dials, sessions, rcpts, rsets, caProbes, caCached, deferred, hostFails, skipped atomic.Uint64
}

// New returns a Prober for cfg. It sends nothing until the first probe.
func New(cfg Config) *Prober {
	cfg.setDefaults()
	p := &Prober{
		cfg:       cfg,
		limits:    newHostLimits(cfg.MaxConnsPerHost, cfg.RatePerHost),
		cache:     newVerdictCache(cfg.CatchAllCacheSize, cfg.CatchAllCacheTTL),
		penalties: newHostPenalties(cfg.HostPenaltySize, cfg.HostPenaltyTTL),
		mailFrom:  "<" + cfg.MailFrom + ">",
	}
	rand.Read(p.secret[:])
	return p
}

// Config returns the effective configuration (defaults applied).
func (p *Prober) Config() Config { return p.cfg }

// Stats returns a snapshot of the counters.
func (p *Prober) Stats() Stats {
	return Stats{
		Dials:          p.dials.Load(),
		Sessions:       p.sessions.Load(),
		RCPT:           p.rcpts.Load(),
		RSET:           p.rsets.Load(),
		CatchAllProbes: p.caProbes.Load(),
		CatchAllCached: p.caCached.Load(),
		Deferred:       p.deferred.Load(),
		HostFailures:   p.hostFails.Load(),
		HostsSkipped:   p.skipped.Load(),
	}
}

// ForgetCatchAll drops the cached catch-all verdict of domain.
func (p *Prober) ForgetCatchAll(domain string) { p.cache.del(normDomain(domain)) }

// Probe checks one address on a domain whose MX hosts are given (as
// resolved by mxdns, in preference order), within ctx's deadline. It tries
// the hosts (and each host's addresses) in preference order, falling to
// the next on refusal, drop or stall. A greylisted address is retried after
// GreylistRetry only if ctx's deadline leaves room for the wait and one more
// session; otherwise the outcome is Unconfirmed with Greylisted set. The
// outcome is Timeout when ctx ended before a verdict.
func (p *Prober) Probe(ctx context.Context, mx []mxdns.MXHost, address string) Result {
	domain := ""
	if at := strings.LastIndexByte(address, '@'); at >= 0 {
		domain = address[at+1:]
	}
	var res [1]Result
	p.ProbeBatch(ctx, domain, mx, []string{address}, res[:])
	return res[0]
}

// ProbeBatch checks many addresses of one domain and stores the verdict of
// addrs[i] in results[i] (len(results) must be at least len(addrs)).
//
// It uses one SMTP session for many RCPTs (MAIL FROM, RCPT, RSET, MAIL FROM,
// RCPT, ...), pipelined when the server offers PIPELINING, and reconnects
// after MaxRcptPerSession RCPTs or when the server drops the connection. Up
// to MaxConnsPerHost sessions run in parallel when there are enough
// addresses. Addresses that get a 4xx are deferred and retried after
// GreylistRetry, within ctx, while the others proceed.
//
// The error is non-nil when results is too short (nothing is probed) or when
// ctx ended before every address had a verdict (it wraps ctx.Err(); those
// addresses are Timeout). Per-address failures are reported in results only.
func (p *Prober) ProbeBatch(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, results []Result) error {
	if len(results) < len(addrs) {
		return fmt.Errorf("smtpprobe: %d results for %d addresses", len(results), len(addrs))
	}
	if len(addrs) == 0 {
		return nil
	}
	b := newBatch(ctx, p, normDomain(domain), mx, addrs, results[:len(addrs)])
	return b.run()
}

func normDomain(d string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
}

// randomLocal returns the catch-all probe's local part for domain: 24
// lower-case letters and digits, random per Prober (from its secret) but
// stable per domain, so that a greylisting server lets the retry through.
func (p *Prober) randomLocal(domain string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	h := sha256.New()
	h.Write(p.secret[:])
	h.Write([]byte(domain))
	sum := h.Sum(nil)
	var b [24]byte
	for i := range b {
		b[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	if b[0] >= '0' && b[0] <= '9' { // start with a letter
		b[0] = 'a' + b[0] - '0'
	}
	return string(b[:])
}

// validRcpt reports whether address can be sent in RCPT TO:<...>.
func validRcpt(address string) bool {
	at := strings.LastIndexByte(address, '@')
	if at <= 0 || at == len(address)-1 || len(address) > 320 {
		return false
	}
	for i := 0; i < len(address); i++ {
		c := address[i]
		if c < 0x20 || c == 0x7f || c == '<' || c == '>' {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
