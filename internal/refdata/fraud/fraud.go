// Package fraud scores single sign-up style submissions (GET /fr): an email
// address with optional name, postal address, phone, IP address and user
// agent. The caller verifies the email first (verify.Engine, single-address
// mode, short budget) and passes the verify.Result in; the scorer itself does
// no network I/O except through the optional History (for example
// PostgreSQL) and PersonLookup dependencies.
//
// Every signal that moves the score is listed in Assessment.Reasons with its
// points. Weights and thresholds come from a Config (JSON, embedded default,
// overridable by a file and reloadable), not from code.
package fraud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

// Input is one fraud query. Every field but Email is optional; optional
// fields with a bad format never fail the query, they become signals.
type Input struct {
	Email       string `json:"email"`
	ReferenceID string `json:"reference_id,omitempty"`
	First       string `json:"first,omitempty"`
	Last        string `json:"last,omitempty"`
	Street      string `json:"street,omitempty"`
	City        string `json:"city,omitempty"`
	State       string `json:"state,omitempty"`
	Zip         string `json:"zip,omitempty"`
	Country     string `json:"country,omitempty"` // ISO 3166 alpha-2
	Phone       string `json:"phone,omitempty"`
	IP          string `json:"ip,omitempty"`
	UserAgent   string `json:"user_agent,omitempty"`
}

// Assessment values.
const (
	LikelyFraud   = "likely_fraud"
	UnlikelyFraud = "unlikely_fraud"
)

// Assessment is the JSON body of GET /fr.
type Assessment struct {
	// Assessment is LikelyFraud when Risk.Score >= the configured threshold.
	Assessment  string    `json:"assessment"`
	ReferenceID string    `json:"reference_id,omitempty"`
	Risk        Risk      `json:"risk"`
	EAM         *Activity `json:"eam,omitempty"`
	DAM         *Activity `json:"dam,omitempty"`
	// EmailValidation is the safe_to_send object of the verification.
	EmailValidation verify.SafeToSendResponse `json:"email_validation"`
	// Reasons lists every signal that moved the score, in evaluation order.
	Reasons []Reason `json:"reasons"`
}

// Risk is the "risk" object.
type Risk struct {
	Score           int         `json:"score"`         // 0-100, higher is riskier
	TumblingRisk    int         `json:"tumbling_risk"` // 0-3
	QueryID         string      `json:"query_id"`
	DomainRiskScore int         `json:"domain_risk_score"` // 0-10
	IP              *IPInfo     `json:"ip,omitempty"`
	Postal          *PostalInfo `json:"postal,omitempty"`
	Phone           *PhoneInfo  `json:"phone,omitempty"`
}

// IPInfo is risk.ip, present when an IP was given.
type IPInfo struct {
	RoutingType     string   `json:"routing_type"` // Routing* constants
	Organization    string   `json:"organization,omitempty"`
	ProxyType       string   `json:"proxy_type,omitempty"` // Proxy* constants
	HostingFacility bool     `json:"hosting_facility"`
	Latitude        *float64 `json:"latitude,omitempty"`
	Longitude       *float64 `json:"longitude,omitempty"`
	Country         string   `json:"country,omitempty"` // from GeoIP
}

// Match values of the *_match fields.
const (
	Match   = "match"
	NoMatch = "no_match"
	NoData  = "no_data"
)

// PostalInfo is risk.postal, present when any name or postal field was
// given.
type PostalInfo struct {
	FirstNameMatch string `json:"first_name_match"`
	LastNameMatch  string `json:"last_name_match"`
	StreetMatch    string `json:"street_match"`
	CityMatch      string `json:"city_match"`
	ZipMatch       string `json:"zip_match"`
	// Deliverability is "unverified" (the format checks passed; there is no
	// address database) or "undeliverable" (the postal code cannot exist).
	Deliverability string `json:"deliverability,omitempty"`
	// DeliverabilitySubstatus names the failed check: zip_invalid,
	// zip_state_mismatch, state_unknown or country_unknown.
	DeliverabilitySubstatus string `json:"deliverability_substatus,omitempty"`
	// AddressType is "street", "po_box" or "military" (from the street).
	AddressType string `json:"address_type,omitempty"`
}

// PhoneInfo is risk.phone, present when a phone was given.
type PhoneInfo struct {
	LineType string `json:"line_type,omitempty"`
	Carrier  string `json:"carrier,omitempty"`
	// Status is "valid", "invalid" (parsed, but not a valid number) or
	// "malformed" (not parseable).
	Status string `json:"status"`
	// Prepaid is unknown without a carrier database and then omitted.
	Prepaid *bool  `json:"prepaid,omitempty"`
	Country string `json:"country,omitempty"`
	// Owner compares the phone's registered owner with the input; every
	// *_match is no_data until a phone ownership data source exists.
	Owner *PhoneOwner `json:"owner,omitempty"`
}

// PhoneOwner is risk.phone.owner: *_match fields are Match, NoMatch or
// NoData.
type PhoneOwner struct {
	FirstNameMatch string `json:"first_name_match"`
	LastNameMatch  string `json:"last_name_match"`
	StreetMatch    string `json:"street_match"`
	CityMatch      string `json:"city_match"`
	ZipMatch       string `json:"zip_match"`
	Type           string `json:"type,omitempty"`
}

// Activity is eam (email level) and dam (domain level).
type Activity struct {
	DateFirstSeen string `json:"date_first_seen"` // YYYY-MM-DD (UTC)
	Longevity     int    `json:"longevity"`       // 0-3
	Velocity      int    `json:"velocity"`        // 0-10
	Popularity    int    `json:"popularity"`      // 0-10
}

// Reason is one signal that moved the score.
type Reason struct {
	Code        string `json:"code"`
	Description string `json:"description"`
	Points      int    `json:"points"`
	// Source says whose stored signals gave the reason: SourceOwn (the
	// asking tenant's own queries and reports) or SourceNetwork (reports of
	// several other tenants). Empty for reasons read from the query alone.
	Source string `json:"source,omitempty"`
}

// Reason sources.
const (
	SourceOwn     = "own"
	SourceNetwork = "network"
)

// PersonLookup finds the reference record of a person by email address; ok
// is false when there is none (or the lookup failed).
type PersonLookup interface {
	Lookup(ctx context.Context, email string) (first, last, street, city, zip string, ok bool)
}

// Deps are the scorer's optional collaborators.
type Deps struct {
	// History records queries and answers velocity questions; nil disables
	// eam, dam, tumbling (beyond plus tags) and velocity signals.
	History History
	// GeoIP adds location, organisation and country mismatch; may be nil.
	GeoIP GeoIP
	// People gives the reference record for the *_match fields; may be nil.
	People PersonLookup
	// HistoryKey keys the digests under which History stores identifiers
	// (addresses, IPs, phones are never stored in clear). All replicas
	// sharing a History must use the same key. Empty uses a fixed key.
	HistoryKey []byte
	// NoFeedback refuses fraud reports (BeginFeedback fails with
	// ErrFeedbackOff): set when History does not keep them durably and
	// shared, so that feedback is never silently lost or seen by one
	// replica only.
	NoFeedback bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// NoRecord stops Assess from recording the query in History (it still
	// reads it), for dry runs.
	NoRecord bool
}

// Scorer assesses queries. It is safe for concurrent use; SetConfig swaps the
// configuration atomically.
type Scorer struct {
	deps Deps
	cfg  atomic.Pointer[Config]
}

// New returns a scorer with cfg and deps. New does not fail: a hand-built
// cfg whose inline IP list entries do not parse has those entries ignored
// (ParseConfig and LoadConfig report them).
func New(cfg Config, deps Deps) *Scorer {
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if len(deps.HistoryKey) == 0 {
		deps.HistoryKey = []byte(defaultHistoryKey)
	}
	s := &Scorer{deps: deps}
	s.SetConfig(cfg)
	return s
}

// SetConfig replaces the configuration; queries already running finish with
// the old one.
func (s *Scorer) SetConfig(cfg Config) {
	c := cfg.prepared()
	c.Weights = maps.Clone(c.Weights) // the caller may go on changing its map
	s.cfg.Store(&c)
}

// Config returns a copy of the current configuration.
func (s *Scorer) Config() Config {
	c := *s.cfg.Load()
	c.Weights = maps.Clone(c.Weights)
	return c
}

// assessor holds the state of one Assess call.
type assessor struct {
	ctx  context.Context
	cfg  *Config
	deps *Deps
	in   *Input
	ev   *verify.Result
	// tenant asked (apikey.Key.Tenant): history and reports are read and
	// recorded as its own.
	tenant string
	out    *Assessment
	sum    int

	country   string     // normalised input country, "" when absent or unknown
	ip        netip.Addr // parsed IP, invalid when absent or malformed
	ipCountry string     // GeoIP country
	phoneKey  string     // E.164 phone, "" when absent or malformed
	local     string     // email local part (as written)
	domain    string     // email domain (lower case ASCII)
	plusTag   bool
	nameMatch bool // first or last name in the local part
}

// add reports the signal code with its configured points; a signal with no
// weight is not reported.
func (a *assessor) add(code string) {
	a.addPoints(code, a.cfg.Weights[code])
}

func (a *assessor) addPoints(code string, points int) {
	if points == 0 {
		return
	}
	a.sum += points
	a.out.Reasons = append(a.out.Reasons, Reason{Code: code, Description: reasonDescriptions[code], Points: points, Source: reasonSources[code]})
}

// Assess scores in for tenant (the client asking: apikey.Key.Tenant). ev
// is the verification of in.Email computed by the caller. The history
// signals are tenant's own (its queries, its reports); other tenants'
// reports count only as the network reasons (see FeedbackConfig). Assess
// never fails: a History or PersonLookup error leaves out the signals that
// needed it.
func (s *Scorer) Assess(ctx context.Context, tenant string, in Input, ev verify.Result) Assessment {
	cfg := s.cfg.Load()
	out := Assessment{
		ReferenceID:     in.ReferenceID,
		EmailValidation: ev.SafeToSend(),
		Reasons:         make([]Reason, 0, 8),
	}
	out.Risk.QueryID = newQueryID()
	a := &assessor{ctx: ctx, cfg: cfg, deps: &s.deps, in: &in, ev: &ev, out: &out, tenant: tenant}

	a.country = a.countrySignal(in.Country)
	a.emailSignals()
	a.ipSignals(in.IP)
	a.phoneSignals(in.Phone)
	a.postalSignals()
	a.userAgentSignals(in.UserAgent)
	newDomain := a.historySignals()
	if a.nameMatch && out.Risk.TumblingRisk < 2 {
		a.add(ReasonEmailNameMatch)
	}
	out.Risk.DomainRiskScore = a.domainRisk(newDomain)

	score := cfg.BaseScore + a.sum
	out.Risk.Score = min(100, max(0, score))
	if out.Risk.Score >= cfg.Threshold {
		out.Assessment = LikelyFraud
	} else {
		out.Assessment = UnlikelyFraud
	}
	return out
}

// newQueryID returns 128 random bits in hex.
func newQueryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

// countrySignal normalises the optional country input.
func (a *assessor) countrySignal(raw string) string {
	if strings.TrimSpace(raw) == "" {
		return ""
	}
	c, ok := normCountry(raw)
	if !ok {
		a.add(ReasonCountryUnknown)
		return ""
	}
	return c
}

// domainRisk computes risk.domain_risk_score from the verification and
// whether the domain is new to History.
func (a *assessor) domainRisk(newDomain bool) int {
	d := a.cfg.DomainRisk
	ev := a.ev
	r := d.Default
	switch {
	case ev.DomainType == "disposable":
		r = d.Disposable
	case ev.Code == verify.CodeDomainNotFound || ev.Code == verify.CodeDomainNoIP ||
		ev.Code == verify.CodeDomainNoMail || ev.Code == verify.CodeDomainSyntax ||
		ev.Code == verify.CodeInvalidTLD:
		r = d.Invalid
	case ev.Code == verify.CodeSpamTrap:
		r = d.Trap
	case len(ev.Corrections) > 0:
		r = d.Typo
	case ev.DomainType == "freeisp":
		r = d.Free
	case ev.DomainType == "biz":
		r = d.Corporate
	}
	if newDomain {
		r += d.NewDomain
	}
	return min(10, max(0, r))
}
