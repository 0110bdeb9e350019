// Package fleet holds the per-host politeness of the verification engine
// for a whole fleet of processes: every worker pod of every running list,
// every API replica and the `worker run` processes that share one backend
// (--fleet-url). It offers three things, each keyed by egress identity and
// MX host address (Key):
//
//   - connection slots (Limiter.Acquire): at most Limits.Conns connections
//     open at once to one host from one egress, as expiring leases, so a
//     killed process frees its slots within LeaseTTL;
//   - a connection rate (Limiter.Wait): at most Limits.Rate new connections
//     a second (GCRA, burst Limits.Burst);
//   - learnt state (Learnt): catch-all verdicts per domain, hosts found
//     stalled or refusing, and learnt per-host limits (RCPTs and rejections
//     a session, connections at once, spacing between connections), each
//     with a TTL, so one process's lesson is every process's.
//
// # Implementations
//
// Local is the in-process implementation: one process's limits, what a
// single `worker run` or API process without --fleet-url has always had.
//
// Redis (Open with redis://host:port/db) shares everything through Redis
// with well-kept libraries: slots are N lock keys per host taken with
// github.com/bsm/redislock (SET NX PX, refreshed every LeaseTTL/3 while held),
// the rate is github.com/go-redis/redis_rate's GCRA (Redis' own clock, so
// process clocks do not matter), learnt state is plain keys with TTLs
// (per-host limits merge in a small script: caps keep the lowest, spacings
// the longest).
//
// Turns divides one host's budget among the n seats of a list's pods
// without any backend: pods that cannot each have a whole connection take
// turns in time slots, so the promise holds, only slower. It is the
// fallback of Fleet.
//
// Fleet is what processes use with --fleet-url: Redis while the backend
// answers, Turns (and a Local memory of learnt state) while it does not —
// never unlimited. See Fleet for the switching rules.
//
// # The seam with the engine
//
// The SMTP engine (internal/engine/smtpprobe, shared.go) calls them here:
//
//   - before each connection (sched.go, Prober.session): Take(ctx,
//     limiter, Key{egress, addr}, lim) (Acquire, then Wait, again when the
//     lease is lost meanwhile), then dial. The
//     session takes no more work once lease.Lost() is closed or
//     lease.Deadline() is near, its I/O is cut shortly after, and
//     lease.Release() is called when the connection is closed.
//     hostQ.sessions stays the local count that decides whether to start
//     another session.
//   - lim is the configured Limits lowered by the learnt limits (and, with
//     a shared Learnt, spaced to a host's anvil window).
//   - catch-all verdicts (job.go): CatchAll when a call starts and before
//     a probe is sent, SetCatchAll when one is found; Claim just before a
//     probe is sent, so that one process of those reaching it at once
//     sends it (claim.go), and Unclaim when it ended without a verdict;
//     the processes that lost the claim Watch it (watch.go) and are woken
//     by the holder's SetCatchAll or Unclaim.
//   - stalled and refusing hosts (penalty.go): Penalty before each
//     session, SetPenalty and ClearPenalty as they are found.
//   - learnt per-host limits: the Prober's HostMemory reads HostLimits in
//     the background (every few seconds per host while its sessions run)
//     and sends every lesson on with LowerHostLimits.
//   - the egress: with SOCKS5 proxies each session picks its proxy first
//     (proxypool.Pool.Pick, Config.PickRoute) and leases on that proxy's
//     Key (its name is EgressForProxy's); direct connections use the
//     configured egress (--fleet-egress).
package fleet

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// DefaultEgress names the cluster's own address as an egress identity.
const DefaultEgress = "direct"

// Key names what per-host limits are counted against: one egress identity
// (the cluster's own address, or one SOCKS5 proxy) and one MX host address.
type Key struct {
	// Egress identifies where connections leave from: DefaultEgress (or the
	// name configured with --fleet-egress) for direct connections,
	// EgressForProxy(url) for each proxy.
	Egress string
	// Host is the MX host address, ip:port.
	Host string
}

func (k Key) String() string { return k.Egress + "|" + k.Host }

// EgressForProxy is the egress identity of a SOCKS5 proxy URL: its scheme,
// host and port, never its credentials.
func EgressForProxy(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "proxy"
	}
	return u.Scheme + "://" + u.Host
}

// Limits are one host's politeness limits as the engine applies them: the
// configured ones, lowered by what was learnt.
type Limits struct {
	// Conns is the number of connections open at once (at least 1).
	Conns int
	// Rate is the number of new connections a second (> 0).
	Rate float64
	// Burst is the number of new connections that may start at once
	// (default Conns).
	Burst int
}

func (l Limits) norm() Limits {
	if l.Conns < 1 {
		l.Conns = 1
	}
	if l.Rate <= 0 {
		l.Rate = 1
	}
	if l.Burst < 1 {
		l.Burst = l.Conns
	}
	return l
}

// Limiter is the per-host politeness the engine asks before each
// connection.
type Limiter interface {
	// Acquire waits for a connection slot on k (at most lim.Conns held at
	// once wherever the limiter reaches: the process, the pods of a list,
	// the fleet) and returns it. The caller opens one connection under
	// it, ends it before Deadline and at once when Lost is closed, and
	// Releases the lease when the connection is closed.
	Acquire(ctx context.Context, k Key, lim Limits) (*Lease, error)
	// Wait returns once one more new connection to k may start: at most
	// lim.Rate a second, lim.Burst at once.
	Wait(ctx context.Context, k Key, lim Limits) error
}

// Take is what a connection to k needs before it is dialled: a slot
// (Acquire), then the rate (Wait) while holding it. A lease lost while
// its holder waits for the rate is given up and another asked for: a
// connection must not start on it. (A Fleet's shared lease lost when the
// backend goes away leaves its holder in Wait until the divided budget
// starts, when other processes' divided leases may already fill the
// host: dialled then, it was one connection too many, issue 33.) The
// Wait is cut short when the lease is lost.
func Take(ctx context.Context, lm Limiter, k Key, lim Limits) (*Lease, error) {
	for {
		l, err := lm.Acquire(ctx, k, lim)
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-l.Lost():
				cancel()
			case <-wctx.Done():
			}
		}()
		err = lm.Wait(wctx, k, lim)
		cancel()
		select {
		case <-l.Lost():
			l.Release()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		default:
		}
		if err != nil {
			l.Release()
			return nil, err
		}
		return l, nil
	}
}

// Lease is one connection slot held.
type Lease struct {
	deadline time.Time // zero: none
	lost     chan struct{}
	lostOnce sync.Once
	relOnce  sync.Once
	release  func()
}

func newLease(deadline time.Time, release func()) *Lease {
	return &Lease{deadline: deadline, lost: make(chan struct{}), release: release}
}

// Deadline is when the slot must be free again (the end of a turn); ok is
// false when the lease lasts until released.
func (l *Lease) Deadline() (t time.Time, ok bool) { return l.deadline, !l.deadline.IsZero() }

// Lost is closed when the slot must be given up at once: the backend lost
// it (expired, restarted, unreachable) or the process switched budgets.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

func (l *Lease) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// Release frees the slot. It may be called more than once.
func (l *Lease) Release() {
	l.relOnce.Do(func() {
		if l.release != nil {
			l.release()
		}
	})
}

// Learnt is the state sessions learn about domains and hosts, shared with
// TTLs. A missing or expired entry reads as not found (ok false).
type Learnt interface {
	// CatchAll returns a domain's catch-all verdict.
	CatchAll(ctx context.Context, domain string) (catchAll, ok bool, err error)
	SetCatchAll(ctx context.Context, domain string, catchAll bool, ttl time.Duration) error
	// Penalty says whether k was found stalled or refusing recently.
	Penalty(ctx context.Context, k Key) (Penalty, bool, error)
	SetPenalty(ctx context.Context, k Key, p Penalty, ttl time.Duration) error
	ClearPenalty(ctx context.Context, k Key) error
	// HostLimits returns what was learnt of k's limits (zero fields:
	// nothing learnt).
	HostLimits(ctx context.Context, k Key) (HostLimits, error)
	// LowerHostLimits merges l into k's learnt limits (caps keep the lowest
	// value, spacings the longest) and keeps them ttl from now.
	LowerHostLimits(ctx context.Context, k Key, l HostLimits, ttl time.Duration) error
	// Claim takes the claim on name for holder for ttl, unless another
	// holder has it (ok false). The holder's own claim is taken again, its
	// TTL renewed. Claims keep work that every process might start at
	// the same moment (a domain's catch-all probe) to one of them; a
	// holder that dies frees its claim when the TTL runs out.
	Claim(ctx context.Context, name, holder string, ttl time.Duration) (ok bool, err error)
	// Unclaim gives up holder's claim on name (nothing if another holds
	// it), so that others need not wait for its TTL.
	Unclaim(ctx context.Context, name, holder string) error
	// Watch returns a channel that receives when name's claim may have
	// ended: its holder gave it up (Unclaim) or stored its verdict
	// (SetCatchAll, for the claim CatchAllClaim names). Call stop when
	// done. A waiter calls Watch before it reads the verdict again, so a
	// wake-up in between is not lost. A claim that expires (its holder
	// killed) says nothing, and a wake-up can be lost while the backend
	// reconnects: waiters still poll, slowly.
	Watch(name string) (woken <-chan struct{}, stop func())
}

// Penalty is a host found stalled (no greeting, connect timed out) or
// refusing connections.
type Penalty struct {
	Reason string
	At     time.Time
}

// HostLimits are limits a host showed. Zero fields are unknown.
type HostLimits struct {
	// RcptPerTransaction: RCPTs a transaction before the host answered
	// "452 4.5.3 too many recipients".
	RcptPerTransaction int
	// RcptPerSession: RCPTs a session before the host said "too many"
	// (452 4.5.3, or 421 after some RCPTs).
	RcptPerSession int
	// RejectsPerSession: rejections a session before the host slowed down.
	RejectsPerSession int
	// RejectsPerTransaction: refused recipients a transaction before the
	// host began holding its replies back (a bad-recipient throttle).
	RejectsPerTransaction int
	// NonmailPerSession: non-mail commands (RSETs) a session before the
	// host dropped it (Exim's smtp_accept_max_nonmail).
	NonmailPerSession int
	// Conns: connections at once the host accepts (421 "too many
	// connections").
	Conns int
	// ConnInterval: spacing between new connections after the host asked
	// for a slow-down (421 4.7.0 "try again later" and the like).
	ConnInterval time.Duration
	// ConnsPerWindow: connections the host accepts in its counting window
	// (Postfix's anvil) before it refuses.
	ConnsPerWindow int
	// Answered: the host has sent an SMTP reply before (a host that has
	// answered and then refuses is busy, not dead).
	Answered bool
	// ReputationAfter and ReputationDelay: the host slowed every reply to
	// an egress identity by ReputationDelay once it had sent this many
	// unknown recipients (a reputation or karma plugin).
	ReputationAfter int
	ReputationDelay time.Duration
}

// merge lowers caps and lengthens spacings with o.
func (h HostLimits) merge(o HostLimits) HostLimits {
	low := func(a, b int) int {
		switch {
		case b <= 0:
			return a
		case a <= 0 || b < a:
			return b
		}
		return a
	}
	h.RcptPerTransaction = low(h.RcptPerTransaction, o.RcptPerTransaction)
	h.RcptPerSession = low(h.RcptPerSession, o.RcptPerSession)
	h.RejectsPerSession = low(h.RejectsPerSession, o.RejectsPerSession)
	h.RejectsPerTransaction = low(h.RejectsPerTransaction, o.RejectsPerTransaction)
	h.NonmailPerSession = low(h.NonmailPerSession, o.NonmailPerSession)
	h.Conns = low(h.Conns, o.Conns)
	h.ConnInterval = max(h.ConnInterval, o.ConnInterval)
	h.ConnsPerWindow = low(h.ConnsPerWindow, o.ConnsPerWindow)
	h.Answered = h.Answered || o.Answered
	h.ReputationAfter = low(h.ReputationAfter, o.ReputationAfter)
	h.ReputationDelay = max(h.ReputationDelay, o.ReputationDelay)
	return h
}

// Mode says where a process's per-host limits hold.
type Mode string

const (
	// ModeLocal: in-process limits (no --fleet-url).
	ModeLocal Mode = "local"
	// ModeShared: the backend holds them for the fleet.
	ModeShared Mode = "shared"
	// ModeFallback: the backend is unreachable; the process keeps its
	// divided share (Turns) until it answers again.
	ModeFallback Mode = "fallback"
)

// Stats are a Fleet's counters. Times are cumulative.
type Stats struct {
	// LeaseWaits counts Acquire calls that found every slot taken and
	// waited; LeaseWaitTime is the time they waited.
	LeaseWaits    uint64
	LeaseWaitTime time.Duration
	// RateWaits counts Wait calls that had to wait for the rate.
	RateWaits uint64
	// LeasesLost counts leases lost before release (expired, backend
	// restarted or unreachable, budget switched).
	LeasesLost uint64
	// Fallbacks counts switches to the divided budget; FallbackTime is the
	// time spent there (up to now).
	Fallbacks    uint64
	FallbackTime time.Duration
	// BackendErrors counts failed calls to the backend.
	BackendErrors uint64
}

// Counters names the counters for shard summaries and metrics.
func (s Stats) Counters() map[string]float64 {
	return map[string]float64{
		"fleet_lease_waits":        float64(s.LeaseWaits),
		"fleet_lease_wait_seconds": s.LeaseWaitTime.Seconds(),
		"fleet_rate_waits":         float64(s.RateWaits),
		"fleet_leases_lost":        float64(s.LeasesLost),
		"fleet_fallbacks":          float64(s.Fallbacks),
		"fleet_fallback_seconds":   s.FallbackTime.Seconds(),
		"fleet_backend_errors":     float64(s.BackendErrors),
	}
}

// Options configure Open.
type Options struct {
	// LeaseTTL is how long a slot outlives a process that stopped
	// refreshing it (default 5s): a killed process frees its slots
	// within it.
	LeaseTTL time.Duration
	// HealthInterval is how often the backend is checked (default 500ms);
	// FailAfter consecutive failures (default 2) switch to the fallback.
	HealthInterval time.Duration
	FailAfter      int
	// Share is this process's divided share of each host's budget while
	// the backend is unreachable (default: the whole budget, one seat).
	Share Share
	// StateSize bounds the in-process learnt state (default 100,000).
	StateSize int
	// Clock is the process's clock (default the wall clock). Redis keeps
	// its own: lease and key TTLs and the rate run on the server's clock.
	Clock clock.Clock
}

func (o *Options) defaults() {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 5 * time.Second
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 500 * time.Millisecond
	}
	if o.FailAfter <= 0 {
		o.FailAfter = 2
	}
	o.Share = o.Share.norm()
	if o.StateSize <= 0 {
		o.StateSize = 100_000
	}
	o.Clock = clock.Or(o.Clock)
}

// ErrClosed is returned by a closed Fleet.
var ErrClosed = errors.New("fleet: closed")

// Open opens the backend named by rawURL ("redis://host:port/db", or
// rediss:// for TLS; ?prefix=... sets the key prefix, "emaildata:" by
// default) and returns a Fleet on it. An unreachable backend is not an
// error: the Fleet starts in fallback and switches when it answers; a
// malformed URL is.
func Open(ctx context.Context, rawURL string, o Options) (*Fleet, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fleet url: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss", "unix":
	default:
		return nil, fmt.Errorf("fleet url: unsupported scheme %q (want redis://host:port/db)", u.Scheme)
	}
	o.defaults()
	r, err := NewRedis(rawURL, o)
	if err != nil {
		return nil, err
	}
	return newFleet(ctx, r, r, o), nil
}

// Redacted returns rawURL without its password, for logs.
func Redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}
