package fraud

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// defaultConfigJSON is the configuration used when no file is given. A file
// given with LoadConfig overrides it key by key.
//
//go:embed default-config.json
var defaultConfigJSON []byte

// Config holds every weight and threshold of the scorer. It is data, not
// code: DefaultConfig reads the embedded default-config.json, LoadConfig
// applies a file (for example a mounted ConfigMap) on top of it, and a
// Watcher reloads that file while the process runs.
type Config struct {
	// BaseScore is the score before any signal (0-100).
	BaseScore int `json:"base_score"`
	// Threshold: a score >= Threshold is assessed "likely_fraud".
	Threshold int `json:"threshold"`
	// Weights maps a reason code (see ReasonCodes) to its points; negative
	// points lower the risk. A code with weight 0, or without an entry, is
	// disabled.
	Weights map[string]int `json:"weights"`

	LocalPart  LocalPartConfig  `json:"local_part"`
	Velocity   VelocityConfig   `json:"velocity"`
	Activity   ActivityConfig   `json:"activity"`
	DomainRisk DomainRiskConfig `json:"domain_risk"`
	Feedback   FeedbackConfig   `json:"feedback"`
	Network    NetworkConfig    `json:"network"`

	// IPLists holds CIDR prefixes or single addresses inline, IPListFiles
	// names files with one prefix or address per line ('#' starts a
	// comment). LoadConfig resolves relative file names against the
	// directory of the config file and reads them.
	IPLists     IPLists `json:"ip_lists"`
	IPListFiles IPLists `json:"ip_list_files"`

	// DefaultPhoneRegion is used to parse a national-format phone number
	// when no valid country is given ("US" by default).
	DefaultPhoneRegion string `json:"default_phone_region"`

	// ip is the compiled form of IPLists plus the contents of IPListFiles.
	ip *ipSets
}

// LocalPartConfig tunes the local-part pattern signals.
type LocalPartConfig struct {
	// RandomMinLength: shorter local parts (letters and digits only) are
	// never called random.
	RandomMinLength int `json:"random_min_length"`
	// MaxConsonantRun: a run of this many consonants or more looks random.
	MaxConsonantRun int `json:"max_consonant_run"`
	// MinEntropy (bits per character) together with a vowel ratio at or
	// below MaxVowelRatio looks random.
	MinEntropy    float64 `json:"min_entropy"`
	MaxVowelRatio float64 `json:"max_vowel_ratio"`
	// MinDigitLetterSwitches: letters and digits alternating this often
	// ("a8k3j9x") looks random.
	MinDigitLetterSwitches int `json:"min_digit_letter_switches"`
	// MinRarePairs consonant pairs that names do not have (such as "kq",
	// "zv"), making up at least MinRarePairRatio of all consonant pairs,
	// look random.
	MinRarePairs     int     `json:"min_rare_pairs"`
	MinRarePairRatio float64 `json:"min_rare_pair_ratio"`
	// DigitRun is the length of a run of digits that counts as long.
	DigitRun int `json:"digit_run"`
	// MinNameLength: shorter names must equal a whole local-part token to
	// count as appearing in it.
	MinNameLength int `json:"min_name_length"`
}

// VelocityConfig sets the history window and the counts that trigger the
// velocity and tumbling signals. Counts exclude the current request.
type VelocityConfig struct {
	Window Duration `json:"window"`
	// EmailEvents: the same address submitted this often within Window.
	EmailEvents int `json:"email_events"`
	// IPDistinctEmails: this many other addresses from the same IP.
	IPDistinctEmails int `json:"ip_distinct_emails"`
	// PhoneDistinctEmails: this many other addresses with the same phone.
	PhoneDistinctEmails int `json:"phone_distinct_emails"`
	// TumblingVariants / TumblingHigh: this many other variants of the same
	// address (same tumbling key) give tumbling_risk 2 / 3.
	TumblingVariants int `json:"tumbling_variants"`
	TumblingHigh     int `json:"tumbling_high"`
}

// ActivityConfig maps history to eam/dam longevity.
type ActivityConfig struct {
	// LongevityDays are the ages (days since first seen) for longevity 1, 2
	// and 3; younger is 0.
	LongevityDays [3]int `json:"longevity_days"`
	// EstablishedDays: an address first seen at least this long ago gives
	// the email_established signal.
	EstablishedDays int `json:"established_days"`
}

// DomainRiskConfig maps what is known of the email domain to
// risk.domain_risk_score (0-10): the highest matching value, plus NewDomain
// when the domain has not been seen before.
type DomainRiskConfig struct {
	Disposable int `json:"disposable"`
	Invalid    int `json:"invalid"`
	Trap       int `json:"trap"`
	Typo       int `json:"typo"`
	Free       int `json:"free"`
	Corporate  int `json:"corporate"`
	Default    int `json:"default"`
	NewDomain  int `json:"new_domain"`
}

// FeedbackConfig bounds fraud reports (POST /feedback/v1): how long they
// count and how many a tenant may keep.
type FeedbackConfig struct {
	// Horizon: a report dated longer ago counts for nothing, and a feedback
	// row dated before it is skipped.
	Horizon Duration `json:"horizon"`
	// TenantQuota bounds the reports one tenant keeps (all its feedback
	// files together, withdrawn reports not counted): a file that would go
	// beyond is refused whole (429) and other tenants are not affected.
	TenantQuota int64 `json:"tenant_quota"`
}

// NetworkConfig is the trust model of other tenants' signals (the
// network): a tenant's own queries and reports count in full for it;
// another tenant's count only when enough distinct tenants agree, never
// from one tenant alone.
type NetworkConfig struct {
	// MinTenants: other tenants' signals on an identifier count only when
	// at least this many distinct tenants gave them (at least 2, so that
	// one other tenant alone never moves a score).
	MinTenants int `json:"min_tenants"`
	// FullTenants: a network reason reaches its full weight when this many
	// distinct tenants agree (fresh); fewer give a share, n/full_tenants.
	// At least MinTenants, at most MaxNetworkTenants.
	FullTenants int `json:"full_tenants"`
	// HalfLife: another tenant's report weighs half as much after it, a
	// quarter after twice it, and so on (each tenant's newest report of an
	// identifier counts 2^(-age/half_life) of one tenant). A tenant's own
	// reports count in full until the horizon.
	HalfLife Duration `json:"half_life"`
	// Window: other tenants that asked about the address within it count
	// for email_velocity_network.
	Window Duration `json:"window"`
}

// IPLists are the CIDR lists by kind.
type IPLists struct {
	Tor     []string `json:"tor"`
	VPN     []string `json:"vpn"`
	Proxy   []string `json:"proxy"`
	Hosting []string `json:"hosting"`
}

// Duration is a time.Duration written as a Go duration string ("24h").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "24h" or "90m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"24h\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// DefaultConfig returns the embedded default configuration.
func DefaultConfig() Config {
	c, err := ParseConfig(defaultConfigJSON, "")
	if err != nil {
		panic("fraud: embedded default-config.json: " + err.Error())
	}
	return c
}

// LoadConfig reads the JSON file at path over the defaults: keys it leaves
// out keep their default values (weights are merged code by code). List
// files it names are read too.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(b, filepath.Dir(path))
}

// ParseConfig is LoadConfig for JSON already in memory; relative list file
// names are resolved against dir. An empty input gives the defaults.
func ParseConfig(data []byte, dir string) (Config, error) {
	var c Config
	if err := decodeStrict(defaultConfigJSON, &c); err != nil {
		return Config{}, err
	}
	if len(bytes.TrimSpace(data)) > 0 && !bytes.Equal(data, defaultConfigJSON) {
		// Weights merge key by key: json.Unmarshal adds to a non-nil map.
		if err := decodeStrict(data, &c); err != nil {
			return Config{}, err
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	sets, err := compileIPLists(c.IPLists, c.IPListFiles, dir)
	if err != nil {
		return Config{}, err
	}
	c.ip = sets
	return c, nil
}

func decodeStrict(data []byte, c *Config) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("fraud config: %w", err)
	}
	return nil
}

// Validate checks ranges and that every weight names a known reason code.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("fraud config: "+format, a...)) }
	if c.BaseScore < 0 || c.BaseScore > 100 {
		bad("base_score %d outside 0-100", c.BaseScore)
	}
	if c.Threshold < 0 || c.Threshold > 100 {
		bad("threshold %d outside 0-100", c.Threshold)
	}
	for code, w := range c.Weights {
		if _, ok := reasonDescriptions[code]; !ok {
			bad("weight for unknown reason code %q", code)
		}
		if w < -100 || w > 100 {
			bad("weight %s=%d outside -100..100", code, w)
		}
	}
	if c.Velocity.Window <= 0 {
		bad("velocity.window must be positive")
	}
	if c.Feedback.Horizon <= 0 {
		bad("feedback.horizon must be positive")
	}
	if c.Feedback.TenantQuota < 1 {
		bad("feedback.tenant_quota must be at least 1")
	}
	n := c.Network
	if n.HalfLife <= 0 || n.Window <= 0 {
		bad("network.half_life and network.window must be positive")
	}
	if n.MinTenants < 2 {
		bad("network.min_tenants %d: at least 2 (one other tenant alone never moves a score)", n.MinTenants)
	}
	if n.FullTenants < n.MinTenants || n.FullTenants > MaxNetworkTenants {
		bad("network.full_tenants %d outside min_tenants..%d", n.FullTenants, MaxNetworkTenants)
	}
	d := c.Activity.LongevityDays
	if d[0] < 0 || d[1] < d[0] || d[2] < d[1] {
		bad("activity.longevity_days must be ascending and non-negative")
	}
	if c.DefaultPhoneRegion != "" {
		if _, ok := normCountry(c.DefaultPhoneRegion); !ok {
			bad("default_phone_region %q is not a known region", c.DefaultPhoneRegion)
		}
	}
	return errors.Join(errs...)
}

// ipSets are the compiled IP lists.
type ipSets struct {
	tor, vpn, proxy, hosting prefixSet
}

func compileIPLists(inline, files IPLists, dir string) (*ipSets, error) {
	s := &ipSets{}
	for _, k := range []struct {
		name   string
		inline []string
		files  []string
		dst    *prefixSet
	}{
		{"tor", inline.Tor, files.Tor, &s.tor},
		{"vpn", inline.VPN, files.VPN, &s.vpn},
		{"proxy", inline.Proxy, files.Proxy, &s.proxy},
		{"hosting", inline.Hosting, files.Hosting, &s.hosting},
	} {
		var ps []netip.Prefix
		for _, e := range k.inline {
			p, err := parsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("fraud config: ip_lists.%s: %w", k.name, err)
			}
			ps = append(ps, p)
		}
		for _, f := range k.files {
			if dir != "" && !filepath.IsAbs(f) {
				f = filepath.Join(dir, f)
			}
			more, err := readPrefixFile(f)
			if err != nil {
				return nil, fmt.Errorf("fraud config: ip_list_files.%s: %w", k.name, err)
			}
			ps = append(ps, more...)
		}
		*k.dst = newPrefixSet(ps)
	}
	return s, nil
}

// readPrefixFile reads one CIDR prefix or address per line; blank lines and
// '#' comments are skipped.
func readPrefixFile(path string) ([]netip.Prefix, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for i, line := range strings.Split(string(b), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		p, err := parsePrefix(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// prepared returns c with its IP lists compiled. A hand-built Config (not
// from DefaultConfig, LoadConfig or ParseConfig) gets its inline lists
// compiled here; entries that do not parse and list files are ignored
// because New cannot fail. Use ParseConfig to catch such errors.
func (c Config) prepared() Config {
	// A hand-built Config that leaves out the trust model gets the
	// default one (a zero horizon would refuse every dated report).
	if c.Feedback == (FeedbackConfig{}) || c.Network == (NetworkConfig{}) {
		d := DefaultConfig()
		if c.Feedback == (FeedbackConfig{}) {
			c.Feedback = d.Feedback
		}
		if c.Network == (NetworkConfig{}) {
			c.Network = d.Network
		}
	}
	if c.ip != nil {
		return c
	}
	s := &ipSets{}
	for _, k := range []struct {
		in  []string
		dst *prefixSet
	}{{c.IPLists.Tor, &s.tor}, {c.IPLists.VPN, &s.vpn}, {c.IPLists.Proxy, &s.proxy}, {c.IPLists.Hosting, &s.hosting}} {
		var ps []netip.Prefix
		for _, e := range k.in {
			if p, err := parsePrefix(e); err == nil {
				ps = append(ps, p)
			}
		}
		*k.dst = newPrefixSet(ps)
	}
	c.ip = s
	return c
}

// listFiles returns the resolved list file names (for the watcher).
func (c Config) listFiles(dir string) []string {
	var out []string
	for _, l := range [][]string{c.IPListFiles.Tor, c.IPListFiles.VPN, c.IPListFiles.Proxy, c.IPListFiles.Hosting} {
		for _, f := range l {
			if dir != "" && !filepath.IsAbs(f) {
				f = filepath.Join(dir, f)
			}
			out = append(out, f)
		}
	}
	return out
}
