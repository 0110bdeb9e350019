// Package smtpprobe is the SMTP mailbox check of the verification engine:
// it asks a domain's mail exchangers, over SMTP, whether they would accept
// mail for an address (EHLO, MAIL FROM, RCPT TO ..., RSET, QUIT) without
// ever sending DATA, and maps the answer to a verdict.
//
// # Verdicts
//
// ReplyTable is the one home of what each class of reply means and what
// the engine does next (rendered into docs/smtp-replies.md). In short, the
// RCPT TO reply decides (see Outcome for the status codes):
//
//   - 2xx: Deliverable, or CatchAll when the domain also accepts a random,
//     clearly non-existent local part (probed once per domain, cached; no
//     probe when another address of the domain got "user unknown",
//     5.1.1: such a domain does not accept every local part).
//   - 5.1.1 and other X.1.x address errors, 5.2.1 (mailbox disabled: it
//     cannot receive, so it is treated like a missing mailbox), and
//     550/551/553 without an enhanced code: Missing.
//   - 5.2.2, or 552 without an enhanced code: Full.
//   - 5.7.x, 5.1.2 ("not accepted for this domain"), "relay denied"-style
//     texts and 554 at RCPT: Policy.
//   - 4xx (greylisting 450/451 ...): temporary. The address is retried
//     after Config.GreylistRetry, at most Config.MaxGreylistRetries times
//     and only while the caller's deadline leaves room for the wait and one
//     more session; then Unconfirmed with Result.Greylisted set when the
//     reply looked like greylisting. A "452 4.5.3 too many recipients" (or
//     Exim's "452 too many recipients") is the server's limit per
//     transaction or per session, not the address's: the address goes to
//     the next transaction or session at once, and the host's limit is
//     remembered.
//   - No RCPT verdict from any MX host: Timeout when no host ever sent a
//     byte (connections refused, reset or unroutable on first contact,
//     connects and greetings timed out, or the connection closed before a
//     greeting, whenever that was: hosts that are down, tarpits, filtered
//     ports), else Unconfirmed (a host answered but the mailbox could not
//     be confirmed: connections dropped after the greeting, 5xx to our own
//     commands, a host that answered before and kept refusing past the
//     deadline).
//
// # Transactions
//
// A session carries many recipients in one transaction: one MAIL FROM,
// then RCPTs up to the host's limit per transaction (Config
// MaxRcptPerTransaction, 100: RFC 5321 §4.5.3.1.8 makes every server take
// at least 100; a host that answers 452 after fewer has its own limit
// learnt), so that a server opens a queue file per transaction, not per
// address (Postfix pauses in_flow_delay, 1s, before each while its queue is
// not draining). RSET and a new MAIL come only when a transaction is full
// or after a 452. The RCPTs of a round trip are pipelined (RFC 2920) when
// the server offers PIPELINING, in a group sized to the host (group.go):
// Config.PipelineStart for a host nothing is known about, growing with
// what it answers up to Config.PipelineDepth, halved, with shorter
// transactions, at a host whose group came late after refused recipients
// (a bad-recipient throttle). Each RCPT reply is its own address's
// verdict; the catch-all probe rides in the same transaction (a lone
// address's with it; a batch's after its first acceptance, behind the
// host's queue when the batch has no deadline, or its first deferral, so
// that a "user unknown" among its answers spares it: at Postfix every
// probe is one more rejection of the session's budget), and no accepted
// address is settled before its domain's catch-all verdict.
//
// # Waiting costs nothing
//
// A Prober schedules work per MX host address, not per call: every call's
// addresses join the queue of their domain's current MX host, and sessions
// to that host (at most Config.MaxConnsPerHost at once, Config.RatePerHost
// new ones per second, Config.MaxSessions open in all) carry RCPTs for
// whichever domains are queued there. A deferred address (greylisting)
// waits in a timer heap, holding no session, goroutine or slot, and rejoins
// its host's queue when due. A session exists only while it has work;
// waiting for a slow or silent host costs its socket and nothing else.
//
// # Hosts that push back
//
// A 421 (or other 4xx) greeting, a 421 or 4xx to EHLO, MAIL or RSET, or a
// refused or dropped connection at a host that has answered before, is the
// host asking to slow down (RFC 5321 §3.8, §4.2.5): its queue is kept, the
// host is retried after a backoff (Config.RefusalBackoff, doubling with
// jitter up to 32 times that), and its number of concurrent sessions and
// new connections a second are lowered for the rest of the run (remembered
// in Config.HostMemory with the other learnt limits: RCPTs per transaction
// and per session, rejections and non-mail commands per session). A host
// that refused a connection while none of our other sessions to it was
// open, after accepting n within Config.RefusalWindow, counts connections
// in windows, as Postfix's anvil does: it gets n a
// window, none before the current one ends, and a Postfix session there
// that has spent its budget while no connection can be had before the next
// window goes on into the slow zone (up to 18 rejections, short of the
// hard error limit) rather than wait idle. Only a host that
// keeps refusing (Config.MaxRefusals times in a row) fails, and an address
// whose deadline leaves no room for the next try is settled Unconfirmed at
// once with the refusal as its reply.
//
// A host that slows every reply to a client address once it sent a few
// unknown recipients, in every session from then on (a reputation or
// karma plugin), is told from an error budget or a throttle by its reply
// latencies and learnt (HostState.ReputationAfter and ReputationDelay):
// with several egress identities (Config.PickRoute) its sessions go out
// through those whose reputation there is clean, each sending it no more
// unknown recipients than it takes; once all are slowed, or with one, as
// many sessions run side by side as the delay makes worth it
// (reputation.go).
//
// Servers that name themselves in their greeting get their known limits up
// front (see server.go): Postfix a budget of rejections a session, Exim and
// unnamed servers at most 10 non-mail commands (RSETs) a session, Exchange
// no slow-reply detection (it delays each rejection on purpose).
//
// # Stalled and unreachable hosts
//
// An MX host address whose connect timed out or was refused on first
// contact, or that sent no byte before its greeting was due (silent until
// Config.GreetingTimeout, or closing the connection without a word), is
// remembered for Config.HostPenaltyTTL: the queued addresses of every
// domain move to that domain's next MX host at once, and later calls skip
// the host. When every host of a domain fails, its addresses get their
// outcome at once, with Result.Err wrapping ErrAllHostsFailed (and
// ErrHostSkipped for a remembered failure). A host is tried again after
// the TTL, and forgiven as soon as it gets as far as a usable session.
// Failures caused by the caller's deadline are never held against a host.
//
// # The caller's context
//
// When ctx ends before an address has a verdict, that address is Timeout
// and the call returns at once; a deadline also bounds the session I/O
// done on the call's behalf and the greylisting retries that still fit.
package smtpprobe

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/platform/durhist"

	"github.com/emaildata/emaildata/internal/platform/clock"
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
	// ConnectTimeout bounds each TCP connect (default 10s). GreetingTimeout
	// is the engine's own, shorter budget for a host that sends nothing at
	// all: the wait for the first byte of its 220 greeting (default 30s; a
	// host silent that long is a tarpit, and is remembered, see
	// HostPenaltyTTL). CommandTimeout is the wait for each reply of a host
	// that has spoken, as RFC 5321 §4.5.3.2 means it: a deadline per reply,
	// restarted whenever a reply arrives, so a pipelined group is alive as
	// long as replies keep coming and a host that answers a group only once
	// it processed all of it (sleeping before some replies) has the whole
	// wait for the group's first reply (default 5m: the RFC's minimum for
	// MAIL and RCPT, and the server's own idle timeout; the prober never
	// sends DATA, whose end gets 10m). A slow host is slow, not failed: the
	// wait holds its session's connection and goroutine, nothing else.
	// Shorter values break the RFC; the API's profile uses them because a
	// call answers within seconds. A caller's deadline cuts all three.
	ConnectTimeout, GreetingTimeout, CommandTimeout time.Duration
	// MaxConnsPerHost is the number of concurrent connections per MX host
	// address (default 2).
	MaxConnsPerHost int
	// MaxSleepingConnsPerHost is the number of concurrent connections per
	// MX host address while sessions there sleep through the host's error
	// sleeps as the cost model planned them (Postfix's slow zone: a
	// second before every reply past smtpd_soft_error_limit; such a
	// session mostly waits on the host, which does nothing for it
	// meanwhile), where the plan finishes the host's work sooner so: at a
	// host that paces connections in windows (anvil), a window's few
	// connections carry more errors each (default 3, issue 34's anvil
	// host's limit; Postfix's own default, smtpd_client_connection_count_limit,
	// is 50). Never above the host's learnt limit (HostState.Conns); below
	// MaxConnsPerHost, MaxConnsPerHost.
	MaxSleepingConnsPerHost int
	// RatePerHost is the number of new connections per second per MX host
	// address (default 5), with a burst of MaxConnsPerHost.
	RatePerHost float64
	// MaxSessions caps the SMTP connections open at once over all hosts
	// (default 1000): sockets, and the footprint on an egress proxy.
	// Sessions sleeping through a host's error sleeps while the process
	// waits for greylisting retries anyway (cost.go's sleepOnLocked) hold
	// none: up to MaxSleepingSessions more sockets, none doing work.
	MaxSessions int
	// MaxSleepingSessions bounds those (default SleepingSessions of
	// MaxSessions); -1: none, so that MaxSessions caps every connection.
	MaxSleepingSessions int
	// MaxRcptPerTransaction is the number of RCPT commands sent after one
	// MAIL FROM (default 100: RFC 5321 §4.5.3.1.8 requires servers to take
	// at least 100 recipients a message; Postfix's smtpd_recipient_limit
	// is 1000, Exim's recipients_max 50000). A host that answers 452 after
	// fewer gets its own limit. While a host's limit is not known, a
	// session whose non-mail budget (RSETs: 10 at a server that does not
	// name itself Postfix) leaves too few transactions for the host's
	// queued work takes bigger ones, within MaxRcptPerSession: the host
	// refuses the recipients past its limit in order (452), which settles
	// it (see Prober.stretchLocked).
	MaxRcptPerTransaction int
	// MaxRcptPerSession is the number of RCPT commands sent in one SMTP
	// session before reconnecting (default 5000: a provider hosting
	// thousands of domains on a few MX hosts may have thousands of a
	// list's recipients, and each new session is a connection it counts;
	// the bound keeps one connection's life to about a hundred round
	// trips). A host that shows a lower limit (452 at the first RCPT of a
	// transaction, or a drop after some RCPTs) gets its own.
	MaxRcptPerSession int
	// MaxRejectsPerSession is the number of rejections (replies other than
	// 2xx to MAIL or RCPT: missing mailboxes, the catch-all probe,
	// deferrals) a session to a server whose greeting names Postfix may
	// get before reconnecting (default 9; negative: no budget). Postfix by
	// default counts each as an error of the session, RSET does not reset
	// the count, and from the 10th error on it holds every reply for a
	// second (smtpd_soft_error_limit, smtpd_error_sleep_time), closing the
	// session at the 20th (smtpd_hard_error_limit). Windows are sized so
	// that the budget can never be overrun (except at a host that limits
	// connections in windows, when no connection can be had before its
	// next window: see slowZoneLocked). A host that does not name
	// itself Exim or Exchange (whose pauses come per rejection, see
	// server.go) and starts holding replies back (a pause of slowReplyGap
	// between pipelined replies) after some rejections has its session
	// dropped at once and gets a budget of one less than it took, as
	// learnt limits go.
	MaxRejectsPerSession int
	// PipelineDepth is the number of RCPT commands (with the MAIL, or RSET
	// and MAIL, that open their transactions) sent per round trip to a
	// server that offers PIPELINING (default 50; 1 disables): the most a
	// host's group grows to.
	PipelineDepth int
	// PipelineStart is the group (RCPTs a round trip) a host nothing is
	// known about starts with (default 10, at most PipelineDepth): a
	// server may answer a group only once it processed all of it, and
	// sleep before the replies that follow some refused recipients. The
	// host's group grows by the RCPTs it answers in each group answered
	// without such sleeps, and is halved when a group's replies came late
	// after refused recipients (see HostState.RejectsPerTransaction).
	PipelineStart int
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
	// out or was refused, or that sent no greeting in time, is skipped
	// (default 30m, longer than a list shard usually runs; negative: never
	// skipped). HostPenaltySize bounds the remembered addresses (default
	// 10_000, least recently marked evicted).
	HostPenaltyTTL  time.Duration
	HostPenaltySize int
	// RefusalBackoff is the first wait before trying again a host that
	// asked to slow down (a 421 greeting ...); each refusal in a row
	// doubles it, up to 32 times, with jitter (default 2s). MaxRefusals is
	// the number of refusals in a row after which the host counts as
	// failed (default 8: about three minutes of trying).
	RefusalBackoff time.Duration
	MaxRefusals    int
	// RefusalWindow is the span over which a host that refused a
	// connection is taken to count them (default 60s: Postfix's
	// anvil_rate_time_unit): its rate is lowered to the connections it
	// accepted within it.
	RefusalWindow time.Duration
	// HostMemory keeps what was learnt about each host (default: in
	// memory, HostPenaltySize hosts, forgotten HostMemoryTTL after the last
	// lesson, default 1h).
	HostMemory    HostMemory
	HostMemoryTTL time.Duration
	// Dialer opens connections (default: a net.Dialer). ConnectTimeout is
	// applied through the context. A ProxyPool's Dial fits here.
	Dialer DialFunc
	// PickRoute, when set, chooses where each session's connection leaves
	// from before its slot is leased (a SOCKS5 proxy of a pool): the
	// egress identity its per-host limits count against, and the dial
	// through it. It should prefer the egresses prefer accepts (nil: any;
	// at a host that slows a client once it sent unknown recipients,
	// those whose reputation there is clean: reputation.go). An error
	// wrapping proxypool.ErrNoProxy parks the work for a while; a dial
	// failing with proxypool.ErrProxyFailed puts it back for the next
	// route.
	PickRoute func(prefer func(egress string) bool) (egress string, dial DialFunc, err error)
	// Routes is the number of egresses PickRoute chooses among (default
	// 1): a host may have MaxConnsPerHost sessions through each.
	Routes int
	// AllowAddr, when set, must accept an MX host address before anything
	// is dialled (directly or through a proxy): the SSRF guard.
	AllowAddr func(netip.Addr) error
	// Limiter holds each host's connection slots (MaxConnsPerHost lowered
	// by what was learnt) and new connections a second (RatePerHost) for
	// every process that shares it (issue 22): a fleet.Fleet with
	// --fleet-url; default fleet.NewLocal, this Prober's own. Each session
	// takes a lease before it dials, ends before the lease does, and
	// gives it back when its connection is closed.
	Limiter fleet.Limiter
	// Clock times everything the Prober waits for or remembers (default
	// the wall clock; the wiring chooses it).
	Clock clock.Clock
	// Learnt, when set, shares what sessions learn with the processes
	// that share it: catch-all verdicts (CatchAllCacheTTL), stalled and
	// refusing hosts (HostPenaltyTTL) and learnt per-host limits
	// (HostMemoryTTL; unless HostMemory is set). Nil: this Prober's own
	// memory only.
	Learnt fleet.Learnt
	// Egress names where direct connections leave from, the identity
	// per-host limits are counted against (default fleet.DefaultEgress).
	Egress string
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	if c.Port <= 0 {
		c.Port = 25
	}
	if c.HELOName == "" {
		c.HELOName = "localhost"
	}
	def(&c.ConnectTimeout, 10*time.Second)
	def(&c.GreetingTimeout, 30*time.Second)
	def(&c.CommandTimeout, rfcReplyTimeout)
	def(&c.CatchAllCacheTTL, time.Hour)
	def(&c.GreylistRetry, 60*time.Second)
	defInt(&c.MaxConnsPerHost, 2)
	defInt(&c.MaxSleepingConnsPerHost, 3)
	defInt(&c.Routes, 1)
	defInt(&c.MaxSessions, 1000)
	if c.MaxSleepingSessions == 0 { // (-1 stays: none)
		c.MaxSleepingSessions = SleepingSessions(c.MaxSessions)
	}
	defInt(&c.MaxRcptPerTransaction, 100)
	defInt(&c.MaxRcptPerSession, 5000)
	defInt(&c.PipelineDepth, 50)
	defInt(&c.PipelineStart, 10)
	c.PipelineStart = min(c.PipelineStart, c.PipelineDepth)
	defInt(&c.MaxRefusals, 8)
	def(&c.RefusalBackoff, 2*time.Second)
	def(&c.RefusalWindow, time.Minute)
	def(&c.HostMemoryTTL, time.Hour)
	defInt(&c.CatchAllCacheSize, 100_000)
	defInt(&c.HostPenaltySize, 10_000)
	if c.RatePerHost <= 0 {
		c.RatePerHost = 5
	}
	if c.HostPenaltyTTL == 0 {
		c.HostPenaltyTTL = 30 * time.Minute
	}
	switch {
	case c.MaxRejectsPerSession == 0:
		c.MaxRejectsPerSession = 9
	case c.MaxRejectsPerSession < 0:
		c.MaxRejectsPerSession = 0
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
	if c.Egress == "" {
		c.Egress = fleet.DefaultEgress
	}
	c.Clock = clock.Or(c.Clock)
	if c.Limiter == nil {
		c.Limiter = fleet.NewLocal(0, c.Clock)
	}
	if c.HostMemory == nil {
		c.HostMemory = NewHostMemory(c.HostPenaltySize, c.HostMemoryTTL, c.Clock)
		if c.Learnt != nil {
			c.HostMemory = newSharedHostMemory(c.HostMemory, c.Learnt, c.Egress, c.HostMemoryTTL, c.Clock)
		}
	}
}

// DialFunc opens a connection.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Outcome is the verdict of a probe. The zero value is Unconfirmed, so an
// unset Result never reads as deliverable.
type Outcome int

const (
	// Unconfirmed: the domain has mail exchangers but no RCPT verdict could
	// be had (connections dropped after the greeting, persistent 4xx,
	// greylisting outlasting the retries or the deadline, refusals past the
	// deadline at a host that answered before): a host answered, but the
	// mailbox could not be confirmed.
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
	// Timeout: no MX host ever sent a byte (refused, reset or unroutable
	// on first contact, or silent until the prober's timeouts), or the
	// caller's context ended (or its deadline could not be met) before a
	// verdict.
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
	// ErrHostRefusing: the MX host asked to slow down (421 ...)
	// Config.MaxRefusals times in a row.
	ErrHostRefusing = errors.New("smtpprobe: MX host kept refusing")
	// ErrNotAllowed: the MX host address is refused by Config.AllowAddr.
	ErrNotAllowed = errors.New("smtpprobe: MX host address not allowed")
)

// Stats are cumulative counters of a Prober. The durations say where the
// time went: SessionTime is connections open (working, or waiting for a
// slow host), DeferredTime is addresses waiting out a greylisting delay
// (holding nothing), QueueTime is addresses queued for a session slot or a
// rate token.
type Stats struct {
	Dials          uint64 // connection attempts
	Sessions       uint64 // sessions that reached a usable EHLO/HELO state
	RCPT           uint64 // RCPT commands sent (catch-all probes included)
	RSET           uint64 // RSET commands sent
	MAIL           uint64 // MAIL commands sent: transactions
	Refusals       uint64 // times a host asked to slow down (421 or 4xx greeting or session reply, refused connection after a session)
	CatchAllProbes uint64 // RCPTs for a random local part
	CatchAllCached uint64 // calls that took the catch-all verdict from the cache
	// CatchAllClaimsLost counts catch-all probes not sent because another
	// process sharing Config.Learnt had claimed the domain's probe.
	CatchAllClaimsLost uint64
	Deferred           uint64 // addresses deferred after a 4xx for a later retry
	Retries            uint64 // deferred addresses sent again
	SessionLimits      uint64 // sessions ended early by a server's per-session limit (RCPTs, or a Postfix server's rejection budget)
	HostFailures       uint64 // sessions that failed before any RCPT verdict
	HostsSkipped       uint64 // MX host addresses skipped as recently stalled or unreachable
	Stalled            uint64 // hosts that timed out on connect or greeting (tarpits)
	ProxyFailovers     uint64 // connections moved to another proxy after a proxy failed
	OpenSessionsPeak   uint64 // most sessions open at once

	SessionTime time.Duration
	StalledTime time.Duration // part of SessionTime spent on connects and greetings that timed out
	// HostFloor and HostSpan sum, over the hosts with sessions, the floor
	// their limits impose and the span their work took (pace.go): a
	// HostSpan far above HostFloor says the hosts were not what paced the
	// work.
	HostFloor, HostSpan time.Duration
	DeferredTime        time.Duration
	QueueTime           time.Duration

	// SessionLatency is the distribution of connection lifetimes (connect
	// to close); SetupLatency of connect, greeting and EHLO of the sessions
	// that got that far.
	SessionLatency, SetupLatency durhist.Snapshot
}

// Histogram keys in Counters.
const (
	SessionDurationKey = "smtp_session_duration_seconds"
	SetupDurationKey   = "smtp_setup_duration_seconds"
)

// sessionBounds span a quick session on a near host to a tarpit's greeting
// timeout and a long pipelined session.
var sessionBounds = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// Counters names the cumulative counters for reports and metrics
// (workers' shard summaries; the manager adds them up). Times are seconds.
func (s Stats) Counters() map[string]float64 {
	m := map[string]float64{
		"smtp_dials":                float64(s.Dials),
		"smtp_sessions":             float64(s.Sessions),
		"smtp_rcpt":                 float64(s.RCPT),
		"smtp_mail":                 float64(s.MAIL),
		"smtp_refusals":             float64(s.Refusals),
		"smtp_catchall_probes":      float64(s.CatchAllProbes),
		"smtp_catchall_claims_lost": float64(s.CatchAllClaimsLost),
		"smtp_deferred":             float64(s.Deferred),
		"smtp_retries":              float64(s.Retries),
		"smtp_session_limits":       float64(s.SessionLimits),
		"smtp_host_failures":        float64(s.HostFailures),
		"smtp_hosts_skipped":        float64(s.HostsSkipped),
		"smtp_stalled_hosts":        float64(s.Stalled),
		"smtp_proxy_failovers":      float64(s.ProxyFailovers),
		"smtp_session_seconds":      s.SessionTime.Seconds(),
		"smtp_stalled_seconds":      s.StalledTime.Seconds(),
		"smtp_deferred_seconds":     s.DeferredTime.Seconds(),
		"smtp_queued_seconds":       s.QueueTime.Seconds(),
		"smtp_host_floor_seconds":   s.HostFloor.Seconds(),
		"smtp_host_span_seconds":    s.HostSpan.Seconds(),
	}
	s.SessionLatency.AddCounters(m, SessionDurationKey)
	s.SetupLatency.AddCounters(m, SetupDurationKey)
	return m
}

// Prober runs SMTP probes. It is safe for concurrent use; the per-host
// queues and limits, the catch-all cache and the memory of stalled or
// unreachable hosts are shared by all its calls.
type Prober struct {
	cfg       Config
	clk       clock.Clock // cfg.Clock
	cache     *verdictCache
	penalties *hostPenalties // nil when disabled
	secret    [16]byte
	mailFrom  string // "<...>" reverse path

	// mu guards the scheduler: host queues, jobs, items and the timer heap.
	mu      sync.Mutex
	hosts   map[string]*hostQ
	sweepAt int
	// Floors and spans of the hosts swept from hosts, so that
	// Stats.HostFloor and HostSpan only grow.
	sweptFloor, sweptSpan time.Duration
	open                  int      // sessions running (waiting for a token, connecting or open)
	waitq                 []*hostQ // hosts waiting for a global session slot
	unslotted             int      // sessions sleeping through a host's errors without a slot (sleepOnLocked)
	deferred              itemHeap
	timer                 clock.Timer
	timerAt               time.Time
	caOwner               map[string]*job // domain → the job whose catch-all probe is in flight
	// greyLast are the latest greylisting deferrals (see horizonLocked),
	// [1] at another host than [0]'s.
	greyLast [2]greyMark
	// holder names this Prober in fleet-wide claims (claim.go).
	holder string
	// tickets numbers the window tickets this Prober took (tickets.go).
	tickets atomic.Uint64
	// claimPoll is the safety-net poll of a probe waiting for another
	// process's claim (claimPollList or claimPollCall); tests lengthen it.
	claimPoll func(j *job) time.Duration

	st counters
}

type counters struct {
	dials, sessions, rcpts, rsets, mails, refusals, caProbes, caCached, caClaimsLost, deferred, retries, limits atomic.Uint64
	hostFails, skipped, stalled, failovers, peak                                                                atomic.Uint64
	sessionNs, stalledNs, deferredNs, queueNs                                                                   atomic.Int64
	sessionHist, setupHist                                                                                      *durhist.Histogram
}

// New returns a Prober for cfg. It sends nothing until the first probe.
func New(cfg Config) *Prober {
	cfg.setDefaults()
	p := &Prober{
		cfg:       cfg,
		clk:       cfg.Clock,
		cache:     newVerdictCache(cfg.CatchAllCacheSize, cfg.CatchAllCacheTTL, cfg.Clock),
		penalties: newHostPenalties(cfg.HostPenaltySize, cfg.HostPenaltyTTL, cfg.Learnt, cfg.Egress, cfg.Clock),
		mailFrom:  "<" + cfg.MailFrom + ">",
		hosts:     make(map[string]*hostQ),
		sweepAt:   minSweep,
		caOwner:   make(map[string]*job),
	}
	p.st.sessionHist = durhist.New(sessionBounds...)
	p.st.setupHist = durhist.New(sessionBounds...)
	rand.Read(p.secret[:])
	var id [8]byte
	rand.Read(id[:])
	p.holder = hex.EncodeToString(id[:])
	p.claimPoll = claimPollFor
	return p
}

// Config returns the effective configuration (defaults applied).
func (p *Prober) Config() Config { return p.cfg }

// Stats returns a snapshot of the counters.
func (p *Prober) Stats() Stats {
	c := &p.st
	floor, span := p.paceSums()
	return Stats{
		HostFloor:          floor,
		HostSpan:           span,
		Dials:              c.dials.Load(),
		Sessions:           c.sessions.Load(),
		RCPT:               c.rcpts.Load(),
		RSET:               c.rsets.Load(),
		MAIL:               c.mails.Load(),
		Refusals:           c.refusals.Load(),
		CatchAllProbes:     c.caProbes.Load(),
		CatchAllCached:     c.caCached.Load(),
		CatchAllClaimsLost: c.caClaimsLost.Load(),
		Deferred:           c.deferred.Load(),
		Retries:            c.retries.Load(),
		SessionLimits:      c.limits.Load(),
		HostFailures:       c.hostFails.Load(),
		HostsSkipped:       c.skipped.Load(),
		Stalled:            c.stalled.Load(),
		ProxyFailovers:     c.failovers.Load(),
		OpenSessionsPeak:   c.peak.Load(),
		SessionTime:        time.Duration(c.sessionNs.Load()),
		StalledTime:        time.Duration(c.stalledNs.Load()),
		DeferredTime:       time.Duration(c.deferredNs.Load()),
		QueueTime:          time.Duration(c.queueNs.Load()),
		SessionLatency:     c.sessionHist.Snapshot(),
		SetupLatency:       c.setupHist.Snapshot(),
	}
}

// HostReport is what one MX host address took.
type HostReport struct {
	Addr     string // ip:port
	Sessions int
	RCPT     int
	Span     time.Duration // first session's start to the last reply
	// Floor is the least time the host's own limits allow for its work
	// (pace.go), and Why the limit that sets it.
	Floor time.Duration
	Why   PaceReason
}

// BusiestHosts returns the n host addresses with the longest spans: where
// a list's wall time went when per-host politeness binds.
func (p *Prober) BusiestHosts(n int) []HostReport {
	p.mu.Lock()
	out := make([]HostReport, 0, len(p.hosts))
	for k, q := range p.hosts {
		if q.nSessions > 0 {
			out = append(out, p.reportLocked(k, q))
		}
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b HostReport) int { return cmp.Compare(b.Span, a.Span) })
	return out[:min(n, len(out))]
}

func (p *Prober) noteSession(addr string, t0 time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.hosts[addr]; q != nil {
		if q.nSessions == 0 {
			q.first = t0
		}
		q.nSessions++
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
// addrs[i] in results[i] (len(results) must be at least len(addrs)). It is
// Start followed by Wait.
//
// The error is non-nil when results is too short (nothing is probed) or when
// ctx ended before every address had a verdict (it wraps ctx.Err(); those
// addresses are Timeout). Per-address failures are reported in results only.
func (p *Prober) ProbeBatch(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, results []Result) error {
	pd, err := p.Start(ctx, domain, mx, addrs, results)
	if err != nil {
		return err
	}
	return pd.Wait()
}

// Pending is a started ProbeBatch.
type Pending struct{ j *job }

// Start queues addrs (all of domain) for probing and returns at once;
// results[i] is valid for addrs[i] once Wait returned. Nothing is held
// while the call waits: it is a few structs in the host queues.
func (p *Prober) Start(ctx context.Context, domain string, mx []mxdns.MXHost, addrs []string, results []Result) (*Pending, error) {
	if len(results) < len(addrs) {
		return nil, fmt.Errorf("smtpprobe: %d results for %d addresses", len(results), len(addrs))
	}
	j := p.newJob(ctx, normDomain(domain), mx, addrs, results[:len(addrs)])
	p.submit(j)
	return &Pending{j}, nil
}

// Wait blocks until every address has its verdict. The error wraps
// ctx.Err() when the call's context ended first.
func (pd *Pending) Wait() error {
	<-pd.j.done
	if pd.j.overErr != nil {
		return fmt.Errorf("smtpprobe: %s: %w", pd.j.domain, pd.j.overErr)
	}
	return nil
}

// Done is closed when Wait would not block.
func (pd *Pending) Done() <-chan struct{} { return pd.j.done }

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
