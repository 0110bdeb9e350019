package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/emaildata/emaildata/internal/engine/emaillists"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/proxypool"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/engine/typo"
	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/callback"
)

// VerifyConfig configures the verification engine: the Configuration's
// verification and fleet sections as the engine takes them (VerifyFrom;
// IntoConfig is the inverse). No program takes them as flags: Job workers
// read them from their mounted configuration.
type VerifyConfig struct {
	// DNSServer is the resolver ("host:port"), "system" for the one in
	// /etc/resolv.conf, or "off" to stop at syntax and list checks.
	DNSServer  string
	DNSTimeout time.Duration
	// DNSWorkers bounds the domains of a batch looked up at once.
	DNSWorkers int
	// SMTP turns the mailbox check on.
	SMTP bool
	// Probe is the SMTP prober's politeness and patience, in its own type
	// (smtpprobe.Config, whose comments say what each field does): NewProber
	// adds the guard, the dialer, the proxies and the fleet to it.
	Probe smtpprobe.Config `json:"-"`
	// SMTPAllowCIDRs opens private or loopback ranges to SMTP probes, which
	// by default only reach public addresses (MX records can point
	// anywhere, so this guards the cluster's own network).
	SMTPAllowCIDRs string
	GreylistRetry  time.Duration
	// Proxies are SOCKS5 relays for SMTP (socks5://[user:pass@]host:port),
	// comma separated or repeated; ProxyMaxConns bounds the connections
	// open through each.
	Proxies       StringList
	ProxyMaxConns int
	// RowsInFlight is the number of rows a process keeps in verification
	// at once (shared by the shards it runs, see SharedBy): every wait of
	// the rows in flight overlaps. Each costs about 0.7 KB of memory.
	RowsInFlight int
	// GroupRows is the most rows a shard reads ahead and groups by domain
	// before verification (evlist.Service.GroupRows; at most half its rows
	// in flight).
	GroupRows int
	// ListsDir holds operator list extensions (a mounted ConfigMap). It is
	// the manager's own and not passed to workers.
	ListsDir string
	// ListsBlobKey names the extensions the manager publishes to the blob
	// store for worker Jobs (see PublishLists); workers apply them.
	ListsBlobKey string
	// ExtraTLDs are accepted in addition to ICANN TLDs (comma separated).
	ExtraTLDs string
	// NotAllowed, when set, hears of each MX host address the SSRF guard
	// refused (once per address).
	NotAllowed func(ip string) `json:"-"`

	// Fleet: the shared backend and this process's place in it (see
	// FleetConfig).
	Fleet FleetConfig
	// HistoryURL names the verification history: "" the fleet backend
	// when FleetURL is set (else none), "off" none, or redis://,
	// postgres://, bolt:///path.db.
	HistoryURL string
	// HistoryTTLs say how long each kind of verdict is reused.
	HistoryTTLs evhistory.TTLs
	// HistoryScope says whose earlier checks answer a call:
	// evhistory.ScopeTenant (the default: a tenant's own only; the keyed
	// hash includes the tenant) or evhistory.ScopeShared (every tenant's,
	// dated to the hour: it tells a tenant that someone checked an
	// address, see evhistory.Scope). Every process of an installation must
	// run the same scope (the key check reports one that does not).
	HistoryScope evhistory.Scope
	// HistoryKeyFile holds the history's key (a mounted Secret); empty:
	// $HISTORY_KEY. A history needs a key: HistoryKey, else this, else
	// $HISTORY_KEY; without one the process refuses to start
	// (evhistory.LoadSecret). In a cluster neither is set: the manager and
	// the API read the key from its installation secret into HistoryKey,
	// and worker pods get $HISTORY_KEY from that Secret (a secretKeyRef).
	// Not passed to workers.
	HistoryKeyFile string
	// HistoryKey is the history's key as the manager or the API read it
	// from its installation secret (internal/platform/installsecret,
	// HistoryKey); it takes the place of HistoryKeyFile and $HISTORY_KEY.
	// Not a flag: a key never goes on a command line.
	HistoryKey []byte `json:"-"`
	// HistoryKeyCheck is how often a process checks that the store's
	// history is kept under its key (evhistory.CheckKey).
	HistoryKeyCheck time.Duration
	// History, when set, is used instead of opening HistoryURL (one bolt
	// file shared by the engines of one process).
	History *evhistory.History `json:"-"`
	// Log hears of the fleet's switches and weaker settings (default: the
	// process's slog default).
	Log *slog.Logger `json:"-"`
}

// DefaultVerifyConfig is production's starting point for lists: the
// Configuration's defaults (api/config/v1alpha1, their one home), with
// $FLEET_URL and $HISTORY_URL.
func DefaultVerifyConfig() VerifyConfig { return VerifyFrom(defaultConfig()) }

// DefaultAPIVerifyConfig is the starting point for the API: GET /v5/ev and
// GET /fr answer within seconds, so the SMTP timeouts are the
// configuration's interactive ones.
func DefaultAPIVerifyConfig() VerifyConfig { return APIVerifyFrom(defaultConfig()) }

// StringList is a flag that may be repeated or comma separated.
type StringList []string

func (l *StringList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

// Set adds the comma-separated values of s.
func (l *StringList) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// NewEngine builds the verification engine. With a lists directory it
// keeps the lists reloaded until ctx ends.
func NewEngine(ctx context.Context, c VerifyConfig) (*verify.Engine, error) {
	e := &verify.Engine{Typos: typo.Default(), ExtraTLDs: map[string]bool{}, DomainWorkers: c.DNSWorkers, Clock: processClock}
	f, err := openShared(ctx, e, c)
	if err != nil {
		return nil, err
	}
	base := emaillists.Default()
	e.Lists = func() *emaillists.Lists { return base }
	if c.ListsDir != "" {
		w := emaillists.NewWatcher(base, c.ListsDir, emaillists.DefaultWatchInterval)
		if err := w.LastError(); err != nil {
			return nil, fmt.Errorf("lists in %s: %w", c.ListsDir, err)
		}
		go func() { _ = w.Run(ctx) }()
		e.Lists = w.Lists
	}
	for _, t := range strings.Split(c.ExtraTLDs, ",") {
		if t = strings.Trim(strings.ToLower(strings.TrimSpace(t)), "."); t != "" {
			e.ExtraTLDs[t] = true
		}
	}
	switch c.DNSServer {
	case "", "off":
		return e, nil
	case "system":
		c.DNSServer = mxdns.DefaultServer()
	}
	e.DNS = mxdns.New(mxdns.Config{Server: c.DNSServer, Timeout: c.DNSTimeout, Clock: processClock})
	if !c.SMTP {
		return e, nil
	}
	prober, err := newProber(c, f)
	if err != nil {
		return nil, err
	}
	e.SMTP = prober
	return e, nil
}

// NewProber builds the SMTP stage from the config: the SSRF guard on every
// MX host address, direct or through the SOCKS5 proxies; per-host limits
// and learnt state of this process alone.
func NewProber(c VerifyConfig) (*smtpprobe.Prober, error) { return newProber(c, nil) }

// newProber is NewProber with the fleet's per-host limits and shared
// learnt state when f is not nil.
func newProber(c VerifyConfig, f *fleet.Fleet) (*smtpprobe.Prober, error) {
	policy, err := callback.ParsePolicy(c.SMTPAllowCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--smtp-allow-cidrs: %w", err)
	}
	cfg := c.Probe
	cfg.AllowAddr, cfg.Dialer, cfg.Egress = allowAddr(policy, c.NotAllowed), guardedDialer(policy), c.Fleet.Egress
	cfg.Clock = processClock
	if f != nil {
		cfg.Limiter, cfg.Learnt = f, f
	}
	if len(c.Proxies) > 0 {
		pool, err := proxypool.New(proxypool.Config{URLs: c.Proxies, MaxConnsPerProxy: c.ProxyMaxConns, Clock: processClock})
		if err != nil {
			return nil, fmt.Errorf("--smtp-proxy: %w", err)
		}
		// The proxies are the operator's own: the guard applies to the
		// destinations (AllowAddr), not to the proxies' addresses.
		cfg.Dialer = pool.Dial
		// Each session picks its proxy before it leases a slot: per-host
		// limits count per proxy, each proxy being an egress identity.
		cfg.PickRoute = func(prefer func(egress string) bool) (string, smtpprobe.DialFunc, error) {
			r, err := pool.PickFor(prefer)
			if err != nil {
				return "", nil, err
			}
			return r.Name(), r.Dial, nil
		}
		cfg.Routes = len(c.Proxies)
	}
	return smtpprobe.New(cfg), nil
}

// allowAddr is the SSRF guard on MX host addresses, telling notify of each
// refused address once.
func allowAddr(p callback.Policy, notify func(ip string)) func(netip.Addr) error {
	var seen sync.Map
	return func(a netip.Addr) error {
		if p.Allowed(a) {
			return nil
		}
		if _, dup := seen.LoadOrStore(a, true); !dup && notify != nil {
			notify(a.String())
		}
		return errors.New("not a public address (see --smtp-allow-cidrs)")
	}
}

// guardedDialer refuses connections to addresses the policy does not allow
// (loopback, private, link-local... by default), checked on the resolved
// address at connect time.
func guardedDialer(p callback.Policy) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if !p.Allowed(ap.Addr()) {
			return fmt.Errorf("smtp probe to %s refused: not a public address", ap.Addr())
		}
		return nil
	}}
	return d.DialContext
}
