package fraud

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
)

// defaultHistoryKey keys the identifier digests when Deps.HistoryKey is
// empty.
const defaultHistoryKey = "emaildata-fraud-history-v1"

// Keys identify the parties of one query in a History. They are opaque
// digests (keyed HMAC-SHA256 of the normalised values, computed by the
// Scorer): a History never sees an address, IP or phone number in clear.
// An empty key means the value was not given.
type Keys struct {
	Email    string // the whole address
	Domain   string // its domain
	Tumbling string // the address without plus tag, dots and trailing digits
	IP       string
	Phone    string // E.164 when parseable
}

// Event is one recorded query.
type Event struct {
	Keys
	// Tenant asked the query; its velocity and activity counts are its own.
	Tenant string
	At     time.Time
}

// StatsQuery asks a History about one query.
type StatsQuery struct {
	Keys
	// Tenant asks: every count is of its own queries, and Reported tells
	// its own reports from other tenants'.
	Tenant string
	// Now and Window bound the window counts, [Now-Window, Now].
	Now    time.Time
	Window time.Duration
	// ReportsSince is the horizon: reports dated before it are not counted.
	ReportsSince time.Time
	// NetworkSince starts the window of EmailNetworkTenants.
	NetworkSince time.Time
}

// Stats answer the velocity questions for one query, from the asking
// tenant's own queries only. Window counts cover [now-window, now]; none
// of them includes the query being assessed, which is recorded after
// Stats. Implementations may cap counts (the 0-10 scales saturate far
// below any cap).
type Stats struct {
	EmailCount      int       // events of Email in the window
	EmailTotal      int64     // events of Email ever
	EmailFirstSeen  time.Time // zero when never seen
	DomainCount     int       // events of Domain in the window
	DomainTotal     int64     // events of Domain ever
	DomainFirstSeen time.Time // zero when never seen
	// TumblingVariants counts distinct other Emails with the same Tumbling
	// key in the window.
	TumblingVariants int
	IPCount          int // events from IP in the window
	// IPDistinctEmails counts distinct other Emails from IP in the window.
	IPDistinctEmails int
	PhoneCount       int // events with Phone in the window
	// PhoneDistinctEmails counts distinct other Emails with Phone in the
	// window.
	PhoneDistinctEmails int
	// EmailNetworkTenants counts the other tenants that asked about Email
	// in [NetworkSince, Now] (at most MaxNetworkTenants; queries recorded
	// without a tenant are not counted).
	EmailNetworkTenants int
	// EmailReported, IPReported and PhoneReported sum up the fraud reports
	// (feedback) naming Email, IP and Phone since ReportsSince, of every
	// tenant.
	EmailReported, IPReported, PhoneReported Reported
}

// Reported sums up the reports naming one identifier, by reporting tenant.
type Reported struct {
	// Own is the day of the asking tenant's newest report; zero when none.
	Own time.Time
	// Network holds, for each other tenant that reported the identifier,
	// the day of its newest report: newest first, at most
	// MaxNetworkTenants. Reports stored without a tenant (before reports
	// had one) are in neither.
	Network []time.Time
}

// MaxNetworkTenants bounds Reported.Network: beyond it, more tenants
// agreeing change nothing (NetworkConfig.FullTenants is at most this).
const MaxNetworkTenants = 64

// History stores queries and fraud reports, each with its tenant, and
// answers velocity questions about them. MemoryHistory serves one process
// (make run, tests); PostgresHistory and RedisHistory are shared by all
// API replicas, so they agree on first-seen dates, counts and reports.
type History interface {
	Record(ctx context.Context, ev Event) error
	Stats(ctx context.Context, q StatsQuery) (Stats, error)
	ReportStore
}

// digest returns the keyed digest of a normalised value.
func digest(key []byte, kind byte, v string) string {
	if v == "" {
		return ""
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte{kind, 0})
	m.Write([]byte(v))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(m.Sum(sum[:0])[:16])
}

// keys computes the History keys of the query.
func (a *assessor) keys() Keys {
	key := a.deps.HistoryKey
	var email, tumbling string
	if a.domain != "" {
		email = strings.ToLower(a.local) + "@" + a.domain
		tumbling = tumblingKey(a.local, a.domain)
	} else {
		email = strings.ToLower(strings.TrimSpace(a.in.Email))
	}
	k := Keys{
		Email:    digest(key, 'e', email),
		Domain:   digest(key, 'd', a.domain),
		Tumbling: digest(key, 't', tumbling),
		Phone:    digest(key, 'p', a.phoneKey),
	}
	if a.ip.IsValid() {
		k.IP = digest(key, 'i', a.ip.String())
	}
	return k
}

// HistoryKeys returns the keys under which Assess records in, for example
// to find or delete the records of one person. The email domain is taken
// as written (lower-cased); Assess uses the verified ASCII domain, which is
// the same for all but internationalised domains.
func (s *Scorer) HistoryKeys(in Input) Keys {
	a := &assessor{ctx: context.Background(), cfg: s.cfg.Load(), deps: &s.deps, in: &in, ev: &verify.Result{}, out: &Assessment{}}
	a.country, _ = normCountry(in.Country)
	a.local, a.domain = splitEmail(in.Email)
	if ip, ok := parseIP(in.IP); ok {
		a.ip = ip.WithZone("")
	}
	a.phoneSignals(in.Phone)
	return a.keys()
}

// scale10 maps a count to 0-10 on a log2 scale: 0→0, 1→1, 2-3→2, 4-7→3, ...,
// 512 and more→10.
func scale10(n int64) int {
	if n <= 0 {
		return 0
	}
	return min(10, bits.Len64(uint64(n)))
}

// longevity maps the age of the first sighting to 0-3.
func longevity(first, now time.Time, days [3]int) int {
	if first.IsZero() {
		return 0
	}
	age := now.Sub(first)
	l := 0
	for i, d := range days {
		if age >= time.Duration(d)*24*time.Hour {
			l = i + 1
		}
	}
	return l
}

func activity(first, now time.Time, window int, total int64, days [3]int) *Activity {
	seen := first
	if seen.IsZero() {
		seen = now
	}
	return &Activity{
		DateFirstSeen: seen.UTC().Format(time.DateOnly),
		Longevity:     longevity(first, now, days),
		Velocity:      scale10(int64(window)),
		Popularity:    scale10(total),
	}
}

// historySignals reads and then records the query in History. It returns
// whether the email domain is new (never seen).
func (a *assessor) historySignals() (newDomain bool) {
	tumbling := 0
	if a.plusTag {
		tumbling = 1
	}
	defer func() { a.out.Risk.TumblingRisk = tumbling }()
	h := a.deps.History
	if h == nil || strings.TrimSpace(a.in.Email) == "" {
		return false
	}
	k := a.keys()
	now := a.deps.Now()
	v := &a.cfg.Velocity
	st, err := h.Stats(a.ctx, StatsQuery{Keys: k, Tenant: a.tenant, Now: now, Window: time.Duration(v.Window),
		ReportsSince: now.Add(-time.Duration(a.cfg.Feedback.Horizon)), NetworkSince: now.Add(-time.Duration(a.cfg.Network.Window))})
	if err == nil {
		days := a.cfg.Activity.LongevityDays
		a.out.EAM = activity(st.EmailFirstSeen, now, st.EmailCount, st.EmailTotal, days)
		if k.Domain != "" {
			a.out.DAM = activity(st.DomainFirstSeen, now, st.DomainCount, st.DomainTotal, days)
			newDomain = st.DomainTotal == 0
		}
		if st.EmailTotal == 0 {
			a.add(ReasonEmailNew)
		} else if ed := a.cfg.Activity.EstablishedDays; ed > 0 && now.Sub(st.EmailFirstSeen) >= time.Duration(ed)*24*time.Hour {
			a.add(ReasonEmailEstablished)
		}
		if newDomain {
			a.add(ReasonDomainNew)
		}
		if v.EmailEvents > 0 && st.EmailCount >= v.EmailEvents {
			a.add(ReasonEmailVelocity)
		}
		if share := networkCount(st.EmailNetworkTenants, &a.cfg.Network); share > 0 {
			a.addPoints(ReasonEmailVelocityNetwork, int(math.Round(float64(a.cfg.Weights[ReasonEmailVelocityNetwork])*share)))
		}
		if v.IPDistinctEmails > 0 && k.IP != "" && st.IPDistinctEmails >= v.IPDistinctEmails {
			a.add(ReasonIPVelocity)
		}
		if v.PhoneDistinctEmails > 0 && k.Phone != "" && st.PhoneDistinctEmails >= v.PhoneDistinctEmails {
			a.add(ReasonPhoneVelocity)
		}
		a.reportSignals(st, k, now)
		switch {
		case v.TumblingHigh > 0 && st.TumblingVariants >= v.TumblingHigh:
			tumbling = 3
		case v.TumblingVariants > 0 && st.TumblingVariants >= v.TumblingVariants:
			tumbling = 2
		}
		if tumbling >= 2 {
			// Weight per level above 1: level 2 adds it once, level 3 twice.
			a.addPoints(ReasonEmailTumbling, a.cfg.Weights[ReasonEmailTumbling]*(tumbling-1))
		}
	}
	if !a.deps.NoRecord {
		_ = h.Record(a.ctx, Event{Keys: k, Tenant: a.tenant, At: now})
	}
	return newDomain
}
