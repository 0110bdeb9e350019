package fraud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemoryHistory is a bounded in-memory History for one process (make run,
// tests). Queries are kept per tenant: at most maxKeys identifiers per
// tenant and, per identifier, the maxPerKey (up to twice that between
// trims) most recent event times and the maxPerKey most recently
// associated addresses; beyond that the least recently seen of a small
// random sample of the same tenant's identifiers is evicted, so memory
// stays bounded, hot keys survive, and one tenant's traffic never evicts
// another's. Reports are kept apart (queries never evict them), bounded
// per tenant by the quota BeginReports is given. Everything is lost when
// the process ends.
type MemoryHistory struct {
	mu        sync.Mutex
	maxKeys   int
	maxPerKey int
	tenants   map[string]map[memKeyID]*memKey

	reports map[string]*memReports       // by tenant
	marks   map[memKeyID]map[memMark]int // reported identifier -> (tenant, day) -> reports
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

// memReports are one tenant's committed feedback files, oldest first.
type memReports struct {
	files []*memFile
	n     int64
}

type memFile struct {
	id       string
	received time.Time
	reports  []Report // by line
}

type memMark struct {
	tenant string
	day    int64 // days since the Unix epoch
}

// NewMemoryHistory returns a MemoryHistory keeping at most maxKeys
// identifiers per tenant (default 100000 when <= 0) and maxPerKey events
// per identifier (default 256 when <= 0).
func NewMemoryHistory(maxKeys, maxPerKey int) *MemoryHistory {
	if maxKeys <= 0 {
		maxKeys = 100000
	}
	if maxPerKey <= 0 {
		maxPerKey = 256
	}
	return &MemoryHistory{maxKeys: maxKeys, maxPerKey: maxPerKey, tenants: map[string]map[memKeyID]*memKey{},
		reports: map[string]*memReports{}, marks: map[memKeyID]map[memMark]int{}}
}

// Len returns the number of query identifiers held, all tenants together.
func (h *MemoryHistory) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.tenants {
		n += len(m)
	}
	return n
}

// Record implements History.
func (h *MemoryHistory) Record(_ context.Context, ev Event) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.tenants[ev.Tenant]
	if m == nil {
		m = map[memKeyID]*memKey{}
		h.tenants[ev.Tenant] = m
	}
	h.touch(m, 'e', ev.Email, "", ev.At)
	h.touch(m, 'd', ev.Domain, "", ev.At)
	h.touch(m, 't', ev.Tumbling, ev.Email, ev.At)
	h.touch(m, 'i', ev.IP, ev.Email, ev.At)
	h.touch(m, 'p', ev.Phone, ev.Email, ev.At)
	return nil
}

func (h *MemoryHistory) touch(m map[memKeyID]*memKey, kind byte, key, email string, at time.Time) {
	if key == "" {
		return
	}
	id := memKeyID{kind, key}
	k := m[id]
	if k == nil {
		for len(m) >= h.maxKeys {
			evict(m)
		}
		k = &memKey{first: at, last: at}
		m[id] = k
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
func evict(m map[memKeyID]*memKey) {
	var victim memKeyID
	var vt time.Time
	n := 0
	for id, k := range m {
		if n == 0 || k.last.Before(vt) {
			victim, vt = id, k.last
		}
		n++
		if n == 8 {
			break
		}
	}
	delete(m, victim)
}

// Stats implements History.
func (h *MemoryHistory) Stats(_ context.Context, q StatsQuery) (Stats, error) {
	since, now := q.Now.Add(-q.Window), q.Now
	h.mu.Lock()
	defer h.mu.Unlock()
	var s Stats
	m := h.tenants[q.Tenant]
	get := func(kind byte, key string) *memKey {
		if key == "" || m == nil {
			return nil
		}
		return m[memKeyID{kind, key}]
	}
	if e := get('e', q.Email); e != nil {
		s.EmailCount, s.EmailTotal, s.EmailFirstSeen = e.count(since, now), e.total, e.first
	}
	if d := get('d', q.Domain); d != nil {
		s.DomainCount, s.DomainTotal, s.DomainFirstSeen = d.count(since, now), d.total, d.first
	}
	if t := get('t', q.Tumbling); t != nil {
		s.TumblingVariants = t.distinct(q.Email, since, now)
	}
	if i := get('i', q.IP); i != nil {
		s.IPCount, s.IPDistinctEmails = i.count(since, now), i.distinct(q.Email, since, now)
	}
	if p := get('p', q.Phone); p != nil {
		s.PhoneCount, s.PhoneDistinctEmails = p.count(since, now), p.distinct(q.Email, since, now)
	}
	s.EmailNetworkTenants = h.networkTenants(q)
	from := unixDay(firstDay(q.ReportsSince))
	s.EmailReported = h.reported('e', q.Email, q.Tenant, from)
	s.IPReported = h.reported('i', q.IP, q.Tenant, from)
	s.PhoneReported = h.reported('p', q.Phone, q.Tenant, from)
	return s, nil
}

// networkTenants counts the other tenants that asked about q.Email in
// [q.NetworkSince, q.Now].
func (h *MemoryHistory) networkTenants(q StatsQuery) int {
	if q.Email == "" {
		return 0
	}
	n := 0
	for t, m := range h.tenants {
		if t == q.Tenant || t == "" {
			continue
		}
		if k := m[memKeyID{'e', q.Email}]; k != nil && k.count(q.NetworkSince, q.Now) > 0 {
			if n++; n == MaxNetworkTenants {
				break
			}
		}
	}
	return n
}

// reported sums up the marks of one identifier from day from on.
func (h *MemoryHistory) reported(kind byte, key, tenant string, from int64) Reported {
	if key == "" {
		return Reported{}
	}
	newest := map[string]int64{}
	for mk := range h.marks[memKeyID{kind, key}] {
		if mk.day >= from && mk.tenant != "" && mk.day > newest[mk.tenant] {
			newest[mk.tenant] = mk.day
		}
	}
	return splitReported(newest, tenant)
}

// splitReported turns the newest report day of each tenant into a
// Reported for tenant.
func splitReported(newest map[string]int64, tenant string) Reported {
	var r Reported
	var net []int64
	for t, d := range newest {
		if t == tenant {
			r.Own = dayTime(d)
		} else {
			net = append(net, d)
		}
	}
	slices.Sort(net)
	slices.Reverse(net)
	for _, d := range net[:min(len(net), MaxNetworkTenants)] {
		r.Network = append(r.Network, dayTime(d))
	}
	return r
}

func unixDay(t time.Time) int64 { return t.Unix() / 86400 }

func dayTime(d int64) time.Time { return time.Unix(d*86400, 0).UTC() }

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

// memBatch stages one feedback file in memory until Commit.
type memBatch struct {
	h       *MemoryHistory
	tenant  string
	file    *memFile
	quota   int64
	held    int64 // the tenant's reports at BeginReports
	settled bool
}

// BeginReports implements ReportStore.
func (h *MemoryHistory) BeginReports(_ context.Context, tenant, feedbackID string, received time.Time, quota int64) (ReportBatch, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var held int64
	if r := h.reports[tenant]; r != nil {
		held = r.n
	}
	if held >= quota {
		return nil, &QuotaError{Quota: quota, Held: held}
	}
	return &memBatch{h: h, tenant: tenant, file: &memFile{id: feedbackID, received: received}, quota: quota, held: held}, nil
}

func (b *memBatch) Add(_ context.Context, reports []Report) error {
	if b.settled {
		return errors.New("fraud: feedback file already committed or aborted")
	}
	if n := int64(len(b.file.reports) + len(reports)); b.held+n > b.quota {
		return &QuotaError{Quota: b.quota, Held: b.held, Adds: n}
	}
	b.file.reports = append(b.file.reports, reports...)
	return nil
}

func (b *memBatch) Commit(context.Context) error {
	if b.settled {
		return errors.New("fraud: feedback file already committed or aborted")
	}
	b.settled = true
	h := b.h
	h.mu.Lock()
	defer h.mu.Unlock()
	tr := h.reports[b.tenant]
	if tr == nil {
		tr = &memReports{}
		h.reports[b.tenant] = tr
	}
	n := int64(len(b.file.reports))
	if tr.n+n > b.quota {
		return &QuotaError{Quota: b.quota, Held: tr.n, Adds: n}
	}
	if n == 0 {
		return nil
	}
	sort.SliceStable(b.file.reports, func(i, j int) bool { return b.file.reports[i].Line < b.file.reports[j].Line })
	// Keep the files in listing order (received, ID): files committed
	// out of order (two at once) still list in one order.
	i := sort.Search(len(tr.files), func(i int) bool {
		f := tr.files[i]
		return f.received.After(b.file.received) || f.received.Equal(b.file.received) && f.id > b.file.id
	})
	tr.files = slices.Insert(tr.files, i, b.file)
	tr.n += n
	for i := range b.file.reports {
		h.mark(b.tenant, &b.file.reports[i], 1)
	}
	return nil
}

func (b *memBatch) Abort(context.Context) error {
	b.settled = true
	b.file.reports = nil
	return nil
}

// mark adds delta to the marks of r's identifiers.
func (h *MemoryHistory) mark(tenant string, r *Report, delta int) {
	mk := memMark{tenant, unixDay(r.At)}
	for _, id := range []memKeyID{{'e', r.Email}, {'i', r.IP}, {'p', r.Phone}} {
		if id.key == "" {
			continue
		}
		m := h.marks[id]
		if m == nil {
			m = map[memMark]int{}
			h.marks[id] = m
		}
		m[mk] += delta
		if m[mk] <= 0 {
			delete(m, mk)
			if len(m) == 0 {
				delete(h.marks, id)
			}
		}
	}
}

// ListReports implements ReportStore.
func (h *MemoryHistory) ListReports(_ context.Context, tenant string, f ReportFilter, after string, limit int) ([]StoredReport, string, error) {
	cur, err := parseCursor(after)
	if err != nil {
		return nil, "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	tr := h.reports[tenant]
	if tr == nil || limit <= 0 {
		return nil, "", nil
	}
	var out []StoredReport
	for _, file := range tr.files {
		for _, r := range file.reports {
			sr := StoredReport{Report: r, FeedbackID: file.id, Received: file.received}
			if !cur.before(&sr) || !f.match(&sr) {
				continue
			}
			if len(out) == limit {
				return out, cursorOf(&out[len(out)-1]), nil
			}
			out = append(out, sr)
		}
	}
	return out, "", nil
}

// WithdrawReports implements ReportStore.
func (h *MemoryHistory) WithdrawReports(_ context.Context, tenant string, f ReportFilter) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tr := h.reports[tenant]
	if tr == nil {
		return 0, nil
	}
	var n int64
	files := tr.files[:0]
	for _, file := range tr.files {
		keep := file.reports[:0]
		for i := range file.reports {
			sr := StoredReport{Report: file.reports[i], FeedbackID: file.id}
			if f.match(&sr) {
				h.mark(tenant, &file.reports[i], -1)
				n++
				continue
			}
			keep = append(keep, file.reports[i])
		}
		file.reports = keep
		if len(keep) > 0 {
			files = append(files, file)
		}
	}
	tr.files = files
	tr.n -= n
	return n, nil
}

// reportCursor is where a listing goes on: after the report of file
// (received, id) at line. Every store orders a tenant's reports so.
type reportCursor struct {
	received int64 // Unix ms
	id       string
	line     int
	set      bool
}

func cursorOf(r *StoredReport) string {
	return fmt.Sprintf("%d.%s.%d", r.Received.UnixMilli(), r.FeedbackID, r.Line)
}

// ErrBadCursor refuses a listing cursor that no listing gave.
var ErrBadCursor = errors.New("fraud: not a report listing cursor")

func parseCursor(s string) (reportCursor, error) {
	if s == "" {
		return reportCursor{}, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 || !strings.HasPrefix(parts[1], "fb_") {
		return reportCursor{}, ErrBadCursor
	}
	ms, err1 := strconv.ParseInt(parts[0], 10, 64)
	line, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || line < 0 {
		return reportCursor{}, ErrBadCursor
	}
	return reportCursor{received: ms, id: parts[1], line: line, set: true}, nil
}

// before reports whether the cursor comes before r (r is still to list).
func (c reportCursor) before(r *StoredReport) bool {
	if !c.set {
		return true
	}
	if ms := r.Received.UnixMilli(); ms != c.received {
		return ms > c.received
	}
	if r.FeedbackID != c.id {
		return r.FeedbackID > c.id
	}
	return r.Line > c.line
}
