package wiring

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	cfgv1 "github.com/emaildata/emaildata/api/config/v1alpha1"
	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/platform/installsecret"
	"github.com/emaildata/emaildata/internal/platform/logging"
)

// LoadConfig reads the --config file (empty: the defaults) and fills what
// it leaves empty from the environment (cfgv1.ApplyEnv): the one way the
// binaries get their configuration.
func LoadConfig(path string) (*cfgv1.Configuration, error) {
	c, err := cfgv1.Load(path)
	if err != nil {
		return nil, err
	}
	cfgv1.ApplyEnv(c)
	return c, nil
}

// defaultConfig is the configuration without a file.
func defaultConfig() *cfgv1.Configuration {
	c := cfgv1.Default()
	cfgv1.ApplyEnv(c)
	return c
}

// ConfigPath finds --config FILE (or -config, =FILE) in args before the
// flags are bound, so that the file's values become the flags' defaults
// and a flag given overrides the file.
func ConfigPath(args []string) string {
	for i, a := range args {
		name, v, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if eq {
			return v
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// VerifyFrom is the verification engine of lists as c configures it.
func VerifyFrom(c *cfgv1.Configuration) VerifyConfig {
	v := c.Verification
	s := v.SMTP
	return VerifyConfig{
		DNSServer: v.DNS.Server, DNSTimeout: v.DNS.Timeout.Duration, DNSWorkers: v.DNS.Workers,
		SMTP: s.Enabled, Probe: smtpprobe.Config{
			Port: s.Port, HELOName: s.HELOName, MailFrom: s.MailFrom,
			MaxConnsPerHost: s.MaxConnsPerHost, MaxSleepingConnsPerHost: s.MaxSleepingConnsPerHost, RatePerHost: s.RatePerHost, MaxSessions: s.MaxSessions,
			MaxSleepingSessions:   s.MaxSleepingSessions,
			MaxRcptPerTransaction: s.MaxRcptPerTransaction, MaxRcptPerSession: s.MaxRcptPerSession,
			MaxRejectsPerSession: s.MaxRejectsPerSession, PipelineDepth: s.PipelineDepth, RefusalBackoff: s.RefusalBackoff.Duration,
			ConnectTimeout: s.ConnectTimeout.Duration, GreetingTimeout: s.GreetingTimeout.Duration, CommandTimeout: s.CommandTimeout.Duration,
			HostPenaltyTTL: s.HostPenaltyTTL.Duration, GreylistRetry: s.GreylistRetry.Duration,
			MaxRefusals: s.MaxRefusals, HostMemoryTTL: s.HostMemoryTTL.Duration,
		},
		SMTPAllowCIDRs: strings.Join(s.AllowCIDRs, ","),
		Proxies:        proxies(v.Proxies.URLs), ProxyMaxConns: v.Proxies.MaxConnsPerProxy, RowsInFlight: v.RowsInFlight,
		GroupRows: v.GroupRows,
		ListsDir:  v.ListsDir, ExtraTLDs: strings.Join(v.ExtraTLDs, ","),
		Fleet:      FleetConfig{URL: c.Fleet.URL, Egress: c.Fleet.Egress, LeaseTTL: c.Fleet.LeaseTTL.Duration, Seat: -1, Seats: 1},
		HistoryURL: v.History.URL, HistoryTTLs: evhistory.TTLs{
			Deliverable: v.History.TTLs.Deliverable.Duration, Undeliverable: v.History.TTLs.Undeliverable.Duration,
			CatchAll: v.History.TTLs.CatchAll.Duration, Unverified: v.History.TTLs.Unverified.Duration,
		},
		HistoryScope: evhistory.Scope(v.History.Scope), HistoryKeyFile: v.History.KeyFile,
		HistoryKeyCheck: v.History.KeyCheckInterval.Duration,
	}
}

// APIVerifyFrom is VerifyFrom with the API's interactive SMTP timeouts.
func APIVerifyFrom(c *cfgv1.Configuration) VerifyConfig {
	v := VerifyFrom(c)
	i := c.Verification.Interactive
	v.Probe.ConnectTimeout, v.Probe.GreetingTimeout, v.Probe.CommandTimeout = i.ConnectTimeout.Duration, i.GreetingTimeout.Duration, i.CommandTimeout.Duration
	v.Probe.HostPenaltyTTL = i.HostPenaltyTTL.Duration
	return v
}

// proxies adds the relays of $SMTP_PROXIES (those with a password, which
// the file may not hold) to the file's.
func proxies(file []string) StringList {
	l := StringList(append([]string(nil), file...))
	if env := os.Getenv("SMTP_PROXIES"); env != "" {
		_ = l.Set(env)
	}
	return l
}

// FraudFrom is the fraud scorer's configuration in c; the key from
// $FRAUD_HISTORY_KEY, as before the file.
func FraudFrom(c *cfgv1.Configuration) FraudConfig {
	f := c.Fraud
	return FraudConfig{
		ConfigPath: f.WeightsFile, GeoIPPaths: strings.Join(f.GeoIPDatabases, ","), HistoryURL: f.HistoryURL,
		HistoryKeyFile: f.HistoryKeyFile, HistoryKey: os.Getenv("FRAUD_HISTORY_KEY"),
		Budget: f.EmailBudget.Duration, SMTP: f.SMTP,
	}
}

// LimitsFrom is the input limits in c.
func LimitsFrom(c *cfgv1.Configuration) listfile.Limits {
	l := c.Pipeline.Limits
	return listfile.Limits{MaxExpandedBytes: l.MaxExpandedBytes.Value(), MaxRecordBytes: int(l.MaxRecordBytes.Value()), MaxExpansionRatio: l.MaxExpansionRatio}
}

// LoggingFrom is the log options in c.
func LoggingFrom(c *cfgv1.Configuration) logging.Options {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Logging.Level)) // Validate checked it
	return logging.Options{Level: lvl, Format: c.Logging.Format}
}

// SecretsFrom names the installation secrets c names.
func SecretsFrom(c *cfgv1.Configuration) installsecret.Config {
	s := installsecret.Config{Names: map[installsecret.Kind]string{}}
	for k, name := range c.Installation.Secrets {
		s.Names[installsecret.Kind(k)] = name
	}
	for _, k := range c.Installation.ExternalSecrets {
		s.External = append(s.External, installsecret.Kind(k))
	}
	return s
}

// PrintConfig writes the configuration the process runs with, for
// --print-config: c with the flags given on fs written into it
// (ApplyFlags), secrets redacted, after a comment block of the process's
// own flags (those that are no setting: bind addresses, leader election,
// the list of a shard...) with their effective values, so that everything
// the process runs with is shown and the output still loads as a --config
// file. It returns the exit
// status: 2 when the flags make it invalid.
func PrintConfig(w io.Writer, c *cfgv1.Configuration, fs *flag.FlagSet) int {
	skipped, err := ApplyFlags(c, fs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "configuration:", err)
		return 2
	}
	out, err := cfgv1.Marshal(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, _ = io.WriteString(w, processFlags(fs, skipped))
	_, _ = w.Write(out)
	return 0
}

// processFlags is the comment block of PrintConfig: every flag of fs
// that is no field of the file (or that ApplyFlags could not write, the
// skipped), with its value, given or default; URLs with a password
// redacted.
func processFlags(fs *flag.FlagSet, skipped []string) string {
	fields := map[string]bool{}
	for _, f := range cfgv1.Flags {
		fields[f.Flag] = f.Field != ""
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" || f.Name == "print-config" || fields[f.Name] && !slices.Contains(skipped, f.Name) {
			return
		}
		if b.Len() == 0 {
			b.WriteString("# This process's flags (no settings of the file; docs/configuration.md, migration table):\n")
		}
		how := "default"
		if given[f.Name] {
			how = "given"
		}
		fmt.Fprintf(&b, "#   --%s=%s (%s)\n", f.Name, cfgv1.RedactURL(f.Value.String()), how)
	})
	return b.String()
}

// WorkerConfig is the configuration list workers read by reference (a
// ConfigMap the manager mounts in their Jobs): c without its secrets (URLs
// with a password are left out: workers read them from their environment,
// the Secret the Jobs name) and without what only the manager reads.
func WorkerConfig(c *cfgv1.Configuration) ([]byte, error) {
	w := *c
	for _, f := range cfgv1.EnvURLs {
		if p := f(&w); cfgv1.HasPassword(*p) {
			*p = ""
		}
	}
	w.Verification.Proxies.URLs = nil
	for _, u := range c.Verification.Proxies.URLs {
		if !cfgv1.HasPassword(u) {
			w.Verification.Proxies.URLs = append(w.Verification.Proxies.URLs, u)
		}
	}
	w.Verification.History.KeyFile = "" // workers get $HISTORY_KEY from its Secret
	w.Fraud = cfgv1.Fraud{EmailBudget: c.Fraud.EmailBudget}
	return cfgv1.Marshal(&w)
}

// The environment a Job that gives its worker the configuration by
// reference sets per list (see ApplyJobEnv).
const (
	// EnvFleetSeats is the number of a list's shards sharing each host's
	// budget while the fleet backend is unreachable (FleetConfig.Seats).
	EnvFleetSeats = "EMAILDATA_FLEET_SEATS"
	// EnvFleetRequired makes a worker refuse to start without the fleet
	// backend's URL (FleetConfig.Required).
	EnvFleetRequired = "EMAILDATA_FLEET_REQUIRED"
	// EnvSMTPConns and EnvSMTPRate are a pod's part of each mail host's
	// budget when the manager divides it.
	EnvSMTPConns = "EMAILDATA_SMTP_MAX_CONNS_PER_HOST"
	EnvSMTPRate  = "EMAILDATA_SMTP_RATE_PER_HOST"
)

// ApplyJobEnv applies to vc the per-list values of a by-reference Job,
// and has a worker read the list extensions the manager publishes when
// the configuration names a lists directory (the manager's).
func ApplyJobEnv(vc *VerifyConfig, c *cfgv1.Configuration) error {
	if c.Verification.ListsDir != "" {
		vc.ListsDir, vc.ListsBlobKey = "", ListsBlobKey
	}
	for env, set := range map[string]func(string) error{
		EnvFleetSeats:    func(v string) (err error) { vc.Fleet.Seats, err = strconv.Atoi(v); return err },
		EnvFleetRequired: func(v string) (err error) { vc.Fleet.Required, err = strconv.ParseBool(v); return err },
		EnvSMTPConns:     func(v string) (err error) { vc.Probe.MaxConnsPerHost, err = strconv.Atoi(v); return err },
		EnvSMTPRate:      func(v string) (err error) { vc.Probe.RatePerHost, err = strconv.ParseFloat(v, 64); return err },
	} {
		if v := os.Getenv(env); v != "" {
			if err := set(v); err != nil {
				return fmt.Errorf("$%s: %w", env, err)
			}
		}
	}
	return nil
}

// jobEnv are the per-list environment variables of a by-reference Job
// (ApplyJobEnv's, and the shard index), with what each overrides.
var jobEnv = []struct{ name, what string }{
	{"JOB_COMPLETION_INDEX", "the shard, and the fleet seat"},
	{EnvFleetSeats, "shards sharing each host's budget without the fleet backend"},
	{EnvFleetRequired, "refuse to start without fleet.url"},
	{EnvSMTPConns, "this pod's verification.smtp.maxConnsPerHost"},
	{EnvSMTPRate, "this pod's verification.smtp.ratePerHost"},
}

// JobEnvComment is the comment block of `worker shard --print-config`
// that shows the per-list environment a list's Job gives its pods (the
// seats, the fleet requirement, the pod's share of each host's budget),
// which overrides the file's values: set or unset, so that everything
// the shard runs with is shown.
func JobEnvComment() string {
	var b strings.Builder
	b.WriteString("# This Job's environment (per list; it overrides the file's values):\n")
	for _, e := range jobEnv {
		v, ok := os.LookupEnv(e.name)
		if !ok || v == "" {
			v = "(unset)"
		}
		fmt.Fprintf(&b, "#   $%s=%s (%s)\n", e.name, v, e.what)
	}
	return b.String()
}

// IntoConfig writes vc into c's verification and fleet sections: the
// inverse of VerifyFrom, for processes given a VerifyConfig rather than a
// file (the local stack, tests) whose Job workers must still read their
// settings by reference (WorkerConfigOf). A zero value is unset and keeps
// c's (its default), but where zero means something: no DNS server is
// "off" (NewEngine reads both alike), SMTP off stays off, a history TTL of
// 0 keeps no verdict. What VerifyFrom does not read stays as it is: the
// fleet seats (a Job's own), the lists blob key (the workers derive it,
// ApplyJobEnv), the key itself and the hooks.
func IntoConfig(c *cfgv1.Configuration, vc VerifyConfig) {
	v := &c.Verification
	s := &v.SMTP
	p := vc.Probe
	v.DNS.Server = cmp.Or(vc.DNSServer, "off")
	setDur(&v.DNS.Timeout, vc.DNSTimeout)
	setVal(&v.DNS.Workers, vc.DNSWorkers)
	s.Enabled = vc.SMTP
	setVal(&s.Port, p.Port)
	setVal(&s.HELOName, p.HELOName)
	setVal(&s.MailFrom, p.MailFrom)
	setVal(&s.MaxConnsPerHost, p.MaxConnsPerHost)
	setVal(&s.MaxSleepingConnsPerHost, p.MaxSleepingConnsPerHost)
	setVal(&s.RatePerHost, p.RatePerHost)
	setVal(&s.MaxSessions, p.MaxSessions)
	setVal(&s.MaxSleepingSessions, p.MaxSleepingSessions)
	setVal(&s.MaxRcptPerTransaction, p.MaxRcptPerTransaction)
	setVal(&s.MaxRcptPerSession, p.MaxRcptPerSession)
	setVal(&s.MaxRejectsPerSession, p.MaxRejectsPerSession)
	setVal(&s.PipelineDepth, p.PipelineDepth)
	setVal(&s.MaxRefusals, p.MaxRefusals)
	for _, d := range []struct {
		to   *cfgv1.Duration
		from time.Duration
	}{{&s.RefusalBackoff, p.RefusalBackoff}, {&s.ConnectTimeout, p.ConnectTimeout}, {&s.GreetingTimeout, p.GreetingTimeout},
		{&s.CommandTimeout, p.CommandTimeout}, {&s.HostPenaltyTTL, p.HostPenaltyTTL}, {&s.GreylistRetry, p.GreylistRetry},
		{&s.HostMemoryTTL, p.HostMemoryTTL}, {&c.Fleet.LeaseTTL, vc.Fleet.LeaseTTL}, {&v.History.KeyCheckInterval, vc.HistoryKeyCheck}} {
		setDur(d.to, d.from)
	}
	s.AllowCIDRs = splitList(vc.SMTPAllowCIDRs)
	v.Proxies.URLs = append([]string(nil), vc.Proxies...)
	setVal(&v.Proxies.MaxConnsPerProxy, vc.ProxyMaxConns)
	setVal(&v.RowsInFlight, vc.RowsInFlight)
	setVal(&v.GroupRows, vc.GroupRows)
	v.ListsDir, v.ExtraTLDs = vc.ListsDir, splitList(vc.ExtraTLDs)
	c.Fleet.URL = vc.Fleet.URL
	setVal(&c.Fleet.Egress, vc.Fleet.Egress)
	h := &v.History
	h.URL, h.KeyFile = vc.HistoryURL, vc.HistoryKeyFile
	setVal(&h.Scope, string(vc.HistoryScope))
	t := vc.HistoryTTLs
	h.TTLs.Deliverable, h.TTLs.Undeliverable = cfgv1.Duration{Duration: t.Deliverable}, cfgv1.Duration{Duration: t.Undeliverable}
	h.TTLs.CatchAll, h.TTLs.Unverified = cfgv1.Duration{Duration: t.CatchAll}, cfgv1.Duration{Duration: t.Unverified}
}

// setVal sets *to to v unless v is zero (unset).
func setVal[T comparable](to *T, v T) {
	var zero T
	if v != zero {
		*to = v
	}
}

// setDur sets *to to d unless d is zero (unset).
func setDur(to *cfgv1.Duration, d time.Duration) {
	if d != 0 {
		to.Duration = d
	}
}

// WorkerConfigOf is the configuration list workers read by reference
// when the manager was given its settings as values rather than a file:
// the defaults with vc, the input limits, the store and the people store
// written in (IntoConfig), then WorkerConfig's cut (no secrets).
func WorkerConfigOf(vc VerifyConfig, lim listfile.Limits, blobURL, peopleURL string) ([]byte, error) {
	c := cfgv1.Default()
	IntoConfig(c, vc)
	// As in listfile.Limits, a zero limit is the default.
	l := &c.Pipeline.Limits
	if lim.MaxExpandedBytes != 0 {
		l.MaxExpandedBytes = cfgv1.Bytes(lim.MaxExpandedBytes)
	}
	if lim.MaxRecordBytes != 0 {
		l.MaxRecordBytes = cfgv1.Bytes(int64(lim.MaxRecordBytes))
	}
	setVal(&l.MaxExpansionRatio, lim.MaxExpansionRatio)
	c.Store.URL, c.People.URL = blobURL, peopleURL
	return WorkerConfig(c)
}

// splitList is a comma separated value as a list (nil when empty).
func splitList(s string) []string {
	var l StringList
	_ = l.Set(s)
	return l
}
