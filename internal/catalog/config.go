package catalog

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/emaildata/emaildata/internal/callback"
	"github.com/emaildata/emaildata/internal/emaillists"
	"github.com/emaildata/emaildata/internal/mxdns"
	"github.com/emaildata/emaildata/internal/smtpprobe"
	"github.com/emaildata/emaildata/internal/typo"
	"github.com/emaildata/emaildata/internal/verify"
)

// VerifyConfig configures the verification engine. The API, the manager
// (for the local executor) and the worker take the same flags, and the
// manager passes them on to worker Jobs (see Args).
type VerifyConfig struct {
	// DNSServer is the resolver ("host:port"), "system" for the one in
	// /etc/resolv.conf, or "off" to stop at syntax and list checks.
	DNSServer  string
	DNSTimeout time.Duration
	// SMTP turns the mailbox check on.
	SMTP            bool
	SMTPPort        int
	HELOName        string
	MailFrom        string
	MaxConnsPerHost int
	RatePerHost     float64
	// SMTPAllowCIDRs opens private or loopback ranges to SMTP probes, which
	// by default only reach public addresses (MX records can point
	// anywhere, so this guards the cluster's own network).
	SMTPAllowCIDRs string
	GreylistRetry  time.Duration
	// ListsDir holds operator list extensions (a mounted ConfigMap).
	ListsDir string
	// ListsBlobKey names the extensions the manager publishes to the blob
	// store for worker Jobs (see PublishLists); workers apply them.
	ListsBlobKey string
	// ExtraTLDs are accepted in addition to ICANN TLDs (comma separated).
	ExtraTLDs string
}

// DefaultVerifyConfig is production's starting point.
func DefaultVerifyConfig() VerifyConfig {
	return VerifyConfig{
		DNSServer: "system", DNSTimeout: 2 * time.Second,
		SMTP: true, SMTPPort: 25, HELOName: "verify.emaildata.local", MailFrom: "verify@emaildata.local",
		MaxConnsPerHost: 2, RatePerHost: 5, GreylistRetry: time.Minute,
	}
}

// BindFlags registers the flags on fs.
func (c *VerifyConfig) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.DNSServer, "dns-server", c.DNSServer, `DNS resolver host:port, "system" (/etc/resolv.conf) or "off"`)
	fs.DurationVar(&c.DNSTimeout, "dns-timeout", c.DNSTimeout, "timeout of one DNS query")
	fs.BoolVar(&c.SMTP, "smtp", c.SMTP, "check mailboxes over SMTP")
	fs.IntVar(&c.SMTPPort, "smtp-port", c.SMTPPort, "SMTP port of mail hosts")
	fs.StringVar(&c.HELOName, "smtp-helo", c.HELOName, "EHLO name")
	fs.StringVar(&c.MailFrom, "smtp-mail-from", c.MailFrom, "envelope sender of probes")
	fs.IntVar(&c.MaxConnsPerHost, "smtp-max-conns-per-host", c.MaxConnsPerHost, "concurrent connections per mail host")
	fs.Float64Var(&c.RatePerHost, "smtp-rate-per-host", c.RatePerHost, "new connections per second per mail host")
	fs.StringVar(&c.SMTPAllowCIDRs, "smtp-allow-cidrs", c.SMTPAllowCIDRs, "private ranges SMTP probes may reach, comma separated")
	fs.DurationVar(&c.GreylistRetry, "smtp-greylist-retry", c.GreylistRetry, "delay before retrying a greylisted address")
	fs.StringVar(&c.ListsDir, "lists-dir", c.ListsDir, "directory of list extensions (disposable.txt, free.txt, role.txt, ...)")
	fs.StringVar(&c.ListsBlobKey, "lists-blob-key", c.ListsBlobKey, "blob key of list extensions published by the manager (workers)")
	fs.StringVar(&c.ExtraTLDs, "extra-tlds", c.ExtraTLDs, "top-level domains accepted besides ICANN's, comma separated")
}

// Args renders the config as flags, for worker Jobs.
func (c VerifyConfig) Args() []string {
	return []string{
		"--dns-server=" + c.DNSServer, "--dns-timeout=" + c.DNSTimeout.String(),
		"--smtp=" + strconv.FormatBool(c.SMTP), "--smtp-port=" + strconv.Itoa(c.SMTPPort),
		"--smtp-helo=" + c.HELOName, "--smtp-mail-from=" + c.MailFrom,
		"--smtp-max-conns-per-host=" + strconv.Itoa(c.MaxConnsPerHost),
		"--smtp-rate-per-host=" + strconv.FormatFloat(c.RatePerHost, 'g', -1, 64),
		"--smtp-allow-cidrs=" + c.SMTPAllowCIDRs, "--smtp-greylist-retry=" + c.GreylistRetry.String(),
		"--lists-blob-key=" + c.ListsBlobKey, "--extra-tlds=" + c.ExtraTLDs,
	}
}

// NewEngine builds the verification engine. With a lists directory it
// keeps the lists reloaded until ctx ends.
func NewEngine(ctx context.Context, c VerifyConfig) (*verify.Engine, error) {
	e := &verify.Engine{Typos: typo.Default(), ExtraTLDs: map[string]bool{}}
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
	e.DNS = mxdns.New(mxdns.Config{Server: c.DNSServer, Timeout: c.DNSTimeout})
	if !c.SMTP {
		return e, nil
	}
	policy, err := callback.ParsePolicy(c.SMTPAllowCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--smtp-allow-cidrs: %w", err)
	}
	e.SMTP = smtpprobe.New(smtpprobe.Config{
		Port: c.SMTPPort, HELOName: c.HELOName, MailFrom: c.MailFrom,
		MaxConnsPerHost: c.MaxConnsPerHost, RatePerHost: c.RatePerHost,
		GreylistRetry: c.GreylistRetry,
		Dialer:        guardedDialer(policy),
	})
	return e, nil
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
