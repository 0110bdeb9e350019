package fraud

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math/bits"
	"sort"
	"strings"
	"sync"
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
	At time.Time
}

// Stats answer the velocity questions for one query. Window counts cover
// [now-window, now]; none of them includes the query being assessed, which
// is recorded after Stats. Implementations may cap counts (the 0-10 scales
// saturate far below any cap).
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
	// EmailReports, IPReports and PhoneReports count the fraud reports
	// (Report) naming Email, IP and Phone, ever.
	EmailReports, IPReports, PhoneReports int
}

// History stores queries and answers velocity questions about them. The
// in-memory implementation serves one process; PostgresHistory is shared by
// all API replicas, so they agree on first-seen dates and counts.
type History interface {
	Record(ctx context.Context, ev Event) error
	Stats(ctx context.Context, k Keys, now time.Time, window time.Duration) (Stats, error)
	// Report stores fraud reports (feedback); they are kept apart from
	// queries: never evicted by them, never pruned with them.
	Report(ctx context.Context, reports []Report) error
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
	st, err := h.Stats(a.ctx, k, now, time.Duration(v.Window))
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
		if v.IPDistinctEmails > 0 && k.IP != "" && st.IPDistinctEmails >= v.IPDistinctEmails {
			a.add(ReasonIPVelocity)
		}
		if v.PhoneDistinctEmails > 0 && k.Phone != "" && st.PhoneDistinctEmails >= v.PhoneDistinctEmails {
			a.add(ReasonPhoneVelocity)
		}
		a.reportSignals(st, k)
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
		_ = h.Record(a.ctx, Event{Keys: k, At: now})
	}
	return newDomain
}

// MemoryHistory is a bounded in-memory History for one process (tests,
// single-replica deployments). It keeps at most maxKeys identifiers and, per
// identifier, the maxPerKey (up to twice that between trims) most recent
// event times and the maxPerKey most recently associated addresses; beyond
// that the least recently seen of a small random sample
// is evicted, so memory stays bounded and hot keys survive.
type MemoryHistory struct {
	mu        sync.Mutex
	maxKeys   int
	maxPerKey int
	m         map[memKeyID]*memKey
	// reports counts the reports per identifier (kinds 'e', 'i', 'p'),
	// apart from m so that query traffic never evicts them; at most
	// maxKeys identifiers, beyond which new ones are dropped (Report
	// fails).
	reports map[memKeyID]int
}

type memKeyID struct {
	kind byte
	key  string
}

type memKey struct {
	first, last time.Time
	total       int64
	times       []int64              // event times (Unix ns), ascending, at most 2*maxPerKey
	emails      map[string]time.Time // associated email -> last seen
}

// NewMemoryHistory returns a MemoryHistory keeping at most maxKeys
// identifiers (default 100000 when <= 0) and maxPerKey events per
// identifier (default 256 when <= 0).
func NewMemoryHistory(maxKeys, maxPerKey int) *MemoryHistory {
	if maxKeys <= 0 {
		maxKeys = 100000
	}
	if maxPerKey <= 0 {
		maxPerKey = 256
	}
	return &MemoryHistory{maxKeys: maxKeys, maxPerKey: maxPerKey, m: map[memKeyID]*memKey{}, reports: map[memKeyID]int{}}
}

// ErrReportsFull is returned by MemoryHistory.Report when it holds as many
// reported identifiers as it may.
var ErrReportsFull = errors.New("fraud: in-memory history holds no more reported identifiers")

// Report implements History. Reports are all counted or none (when they
// would exceed the bound).
func (h *MemoryHistory) Report(_ context.Context, reports []Report) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []memKeyID
	for _, r := range reports {
		for _, id := range []memKeyID{{'e', r.Email}, {'i', r.IP}, {'p', r.Phone}} {
			if id.key != "" {
				ids = append(ids, id)
			}
		}
	}
	fresh := map[memKeyID]bool{}
	for _, id := range ids {
		if h.reports[id] == 0 {
			fresh[id] = true
		}
	}
	if len(h.reports)+len(fresh) > h.maxKeys {
		return ErrReportsFull
	}
	for _, id := range ids {
		h.reports[id]++
	}
	return nil
}

// Len returns the number of identifiers held.
func (h *MemoryHistory) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// Record implements History.
func (h *MemoryHistory) Record(_ context.Context, ev Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.touch('e', ev.Email, "", ev.At)
	h.touch('d', ev.Domain, "", ev.At)
	h.touch('t', ev.Tumbling, ev.Email, ev.At)
	h.touch('i', ev.IP, ev.Email, ev.At)
	h.touch('p', ev.Phone, ev.Email, ev.At)
	return nil
}

func (h *MemoryHistory) touch(kind byte, key, email string, at time.Time) {
	if key == "" {
		return
	}
	id := memKeyID{kind, key}
	k := h.m[id]
	if k == nil {
		for len(h.m) >= h.maxKeys {
			h.evict()
		}
		k = &memKey{first: at, last: at}
		h.m[id] = k
	}
	if at.Before(k.first) {
		k.first = at
	}
	if at.After(k.last) {
		k.last = at
	}
	k.total++
	// Insert keeping times ascending (events arrive nearly in order).
	ns := at.UnixNano()
	i := len(k.times)
	for i > 0 && k.times[i-1] > ns {
		i--
	}
	k.times = append(k.times, 0)
	copy(k.times[i+1:], k.times[i:])
	k.times[i] = ns
	if len(k.times) >= 2*h.maxPerKey {
		// Keep the maxPerKey most recent; trimming in halves keeps the
		// cost per event constant.
		k.times = append(k.times[:0], k.times[len(k.times)-h.maxPerKey:]...)
	}
	if email != "" {
		if k.emails == nil {
			k.emails = map[string]time.Time{}
		}
		if prev, ok := k.emails[email]; !ok || at.After(prev) {
			k.emails[email] = at
		}
		if len(k.emails) > h.maxPerKey {
			var oldest string
			var ot time.Time
			for e, t := range k.emails {
				if oldest == "" || t.Before(ot) {
					oldest, ot = e, t
				}
			}
			delete(k.emails, oldest)
		}
	}
}

// evict removes the least recently seen key of a random sample of eight.
func (h *MemoryHistory) evict() {
	var victim memKeyID
	var vt time.Time
	n := 0
	for id, k := range h.m {
		if n == 0 || k.last.Before(vt) {
			victim, vt = id, k.last
		}
		n++
		if n == 8 {
			break
		}
	}
	delete(h.m, victim)
}

// Stats implements History.
func (h *MemoryHistory) Stats(_ context.Context, k Keys, now time.Time, window time.Duration) (Stats, error) {
	since := now.Add(-window)
	h.mu.Lock()
	defer h.mu.Unlock()
	var s Stats
	if e := h.get('e', k.Email); e != nil {
		s.EmailCount, s.EmailTotal, s.EmailFirstSeen = e.count(since, now), e.total, e.first
	}
	if d := h.get('d', k.Domain); d != nil {
		s.DomainCount, s.DomainTotal, s.DomainFirstSeen = d.count(since, now), d.total, d.first
	}
	if t := h.get('t', k.Tumbling); t != nil {
		s.TumblingVariants = t.distinct(k.Email, since, now)
	}
	if i := h.get('i', k.IP); i != nil {
		s.IPCount, s.IPDistinctEmails = i.count(since, now), i.distinct(k.Email, since, now)
	}
	if p := h.get('p', k.Phone); p != nil {
		s.PhoneCount, s.PhoneDistinctEmails = p.count(since, now), p.distinct(k.Email, since, now)
	}
	s.EmailReports, s.IPReports, s.PhoneReports = h.reported('e', k.Email), h.reported('i', k.IP), h.reported('p', k.Phone)
	return s, nil
}

func (h *MemoryHistory) reported(kind byte, key string) int {
	if key == "" {
		return 0
	}
	return h.reports[memKeyID{kind, key}]
}

func (h *MemoryHistory) get(kind byte, key string) *memKey {
	if key == "" {
		return nil
	}
	return h.m[memKeyID{kind, key}]
}

// count returns the number of kept events in [since, now].
func (k *memKey) count(since, now time.Time) int {
	lo, hi := since.UnixNano(), now.UnixNano()
	i := sort.Search(len(k.times), func(i int) bool { return k.times[i] >= lo })
	j := sort.Search(len(k.times), func(i int) bool { return k.times[i] > hi })
	return max(0, j-i)
}

func (k *memKey) distinct(self string, since, now time.Time) int {
	n := 0
	for e, t := range k.emails {
		if e != self && !t.Before(since) && !t.After(now) {
			n++
		}
	}
	return n
}
