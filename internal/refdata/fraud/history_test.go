package fraud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// historyContract checks a History implementation's queries; the
// PostgreSQL and Redis tests run it too.
func historyContract(t *testing.T, h History) {
	ctx := context.Background()
	now := t0
	k := Keys{Email: "A", Domain: "D", Tumbling: "T", IP: "I", Phone: "P"}
	stats := func(tenant string, k Keys, window time.Duration) Stats {
		t.Helper()
		st, err := h.Stats(ctx, StatsQuery{Keys: k, Tenant: tenant, Now: now, Window: window, ReportsSince: now.Add(-24 * time.Hour),
			NetworkSince: now.Add(-window)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	if st := stats("acme", k, 24*time.Hour); !sameStats(st, Stats{}) {
		t.Fatalf("empty history: %+v", st)
	}

	events := []Event{
		{Keys{Email: "C", Domain: "D", IP: "I"}, "acme", now.Add(-48 * time.Hour)}, // outside the window
		{k, "acme", now.Add(-2 * time.Hour)},
		{Keys{Email: "B", Domain: "D", Tumbling: "T", IP: "I"}, "acme", now.Add(-time.Hour)},
		{k, "acme", now.Add(-30 * time.Minute)},
		{Keys{Email: "E", Domain: "D2"}, "acme", now.Add(-10 * time.Minute)}, // no ip, no phone
		{Keys{Email: "F", Domain: "D", IP: "I", Phone: "P"}, "acme", now.Add(-5 * time.Minute)},
	}
	// Another tenant's queries of the same parties, earlier and more of
	// them: they move none of acme's counts or dates.
	for i := range 6 {
		at := now.Add(-time.Duration(72+i) * time.Hour)
		if i >= 3 {
			at = now.Add(-time.Duration(i) * time.Minute)
		}
		events = append(events, Event{Keys{Email: fmt.Sprint("G", i), Domain: "D", Tumbling: "T", IP: "I", Phone: "P"}, "globex", at},
			Event{k, "globex", at})
	}
	for _, ev := range events {
		if err := h.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	want := Stats{
		EmailCount: 2, EmailTotal: 2, EmailFirstSeen: now.Add(-2 * time.Hour),
		DomainCount: 4, DomainTotal: 5, DomainFirstSeen: now.Add(-48 * time.Hour),
		TumblingVariants: 1,
		IPCount:          4, IPDistinctEmails: 2,
		PhoneCount: 3, PhoneDistinctEmails: 1,
		EmailNetworkTenants: 1, // globex asked about A too
	}
	if st := stats("acme", k, 24*time.Hour); !sameStats(st, want) {
		t.Errorf("acme's stats\n got %+v\nwant %+v", st, want)
	}
	wantGlobex := Stats{
		EmailCount: 3, EmailTotal: 6, EmailFirstSeen: now.Add(-74 * time.Hour),
		DomainCount: 6, DomainTotal: 12, DomainFirstSeen: now.Add(-74 * time.Hour),
		TumblingVariants: 3, IPCount: 6, IPDistinctEmails: 3, PhoneCount: 6, PhoneDistinctEmails: 3,
		EmailNetworkTenants: 1,
	}
	if st := stats("globex", k, 24*time.Hour); !sameStats(st, wantGlobex) {
		t.Errorf("globex's stats\n got %+v\nwant %+v", st, wantGlobex)
	}
	if st := stats("initech", k, 24*time.Hour); !sameStats(st, Stats{EmailNetworkTenants: 2}) {
		t.Errorf("a tenant that never asked: %+v", st)
	}
	// The network window: in the last 4 minutes globex asked about A (at
	// -4 and -3 minutes), acme did not.
	if st := stats("acme", Keys{Email: "A"}, 4*time.Minute); st.EmailNetworkTenants != 1 {
		t.Errorf("acme's network count over 4 minutes: %d", st.EmailNetworkTenants)
	}
	if st := stats("globex", Keys{Email: "A"}, 4*time.Minute); st.EmailNetworkTenants != 0 {
		t.Errorf("globex's network count over 4 minutes: %d", st.EmailNetworkTenants)
	}

	// A short window and absent keys.
	want = Stats{EmailCount: 1, EmailTotal: 2, EmailFirstSeen: now.Add(-2 * time.Hour),
		DomainCount: 2, DomainTotal: 5, DomainFirstSeen: now.Add(-48 * time.Hour), EmailNetworkTenants: 1}
	if st := stats("acme", Keys{Email: "A", Domain: "D"}, 45*time.Minute); !sameStats(st, want) {
		t.Errorf("short window\n got %+v\nwant %+v", st, want)
	}

	// A late event older than the first sighting moves first-seen back.
	if err := h.Record(ctx, Event{Keys{Email: "A", Domain: "D"}, "acme", now.Add(-72 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st := stats("acme", Keys{Email: "A", Domain: "D"}, time.Hour)
	if !st.EmailFirstSeen.Equal(now.Add(-72*time.Hour)) || !st.DomainFirstSeen.Equal(now.Add(-72*time.Hour)) || st.EmailTotal != 3 {
		t.Errorf("after late event: %+v", st)
	}
}

func sameStats(a, b Stats) bool {
	return a.EmailCount == b.EmailCount && a.EmailTotal == b.EmailTotal && a.EmailFirstSeen.Equal(b.EmailFirstSeen) &&
		a.DomainCount == b.DomainCount && a.DomainTotal == b.DomainTotal && a.DomainFirstSeen.Equal(b.DomainFirstSeen) &&
		a.TumblingVariants == b.TumblingVariants && a.IPCount == b.IPCount && a.IPDistinctEmails == b.IPDistinctEmails &&
		a.PhoneCount == b.PhoneCount && a.PhoneDistinctEmails == b.PhoneDistinctEmails && a.EmailNetworkTenants == b.EmailNetworkTenants &&
		sameReported(a.EmailReported, b.EmailReported) && sameReported(a.IPReported, b.IPReported) &&
		sameReported(a.PhoneReported, b.PhoneReported)
}

func sameReported(a, b Reported) bool {
	return a.Own.Equal(b.Own) && slices.EqualFunc(a.Network, b.Network, time.Time.Equal)
}

func TestMemoryHistory(t *testing.T) {
	historyContract(t, NewMemoryHistory(0, 0))
	reportContract(t, NewMemoryHistory(0, 0))
}

// TestMemoryHistoryBounded: the identifiers kept are bounded per tenant,
// so that one tenant's flood evicts its own identifiers only.
func TestMemoryHistoryBounded(t *testing.T) {
	h := NewMemoryHistory(100, 4)
	ctx := context.Background()
	keep := Event{Keys{Email: "quiet", Domain: "quiet.example"}, "globex", t0}
	if err := h.Record(ctx, keep); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		ev := Event{Keys{Email: fmt.Sprint("e", i), Domain: "d", IP: "ip"}, "acme", t0.Add(time.Duration(i) * time.Second)}
		if err := h.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.Len(); n > 102 {
		t.Errorf("%d keys kept, bound 100 for acme plus globex's 2", n)
	}
	h.mu.Lock()
	acme := h.tenants["acme"]
	for id, k := range acme {
		if len(k.times) >= 8 || len(k.emails) > 4 {
			t.Errorf("key %v keeps %d times, %d emails", id, len(k.times), len(k.emails))
		}
	}
	hot := acme[memKeyID{'d', "d"}]
	h.mu.Unlock()
	// The hot domain survives eviction and counts all events ever.
	if hot == nil || hot.total != 1000 {
		t.Errorf("hot domain key = %+v", hot)
	}
	q := StatsQuery{Keys: Keys{Email: "e999", IP: "ip"}, Tenant: "acme", Now: t0.Add(1000 * time.Second), Window: time.Hour}
	st, _ := h.Stats(ctx, q)
	if st.IPDistinctEmails != 3 { // the 4 most recent, less itself
		t.Errorf("IPDistinctEmails = %d, want 3 (capped)", st.IPDistinctEmails)
	}
	// globex's identifiers were never evicted by acme's flood.
	st, _ = h.Stats(ctx, StatsQuery{Keys: keep.Keys, Tenant: "globex", Now: t0, Window: time.Hour})
	if st.EmailTotal != 1 || st.DomainTotal != 1 {
		t.Errorf("globex's identifiers after acme's flood: %+v", st)
	}
}

// errHistory fails every call.
type errHistory struct{ records int }

func (e *errHistory) Record(context.Context, Event) error { e.records++; return errors.New("down") }
func (e *errHistory) Stats(context.Context, StatsQuery) (Stats, error) {
	return Stats{}, errors.New("down")
}
func (e *errHistory) BeginReports(context.Context, string, string, time.Time, int64) (ReportBatch, error) {
	return nil, errors.New("down")
}
func (e *errHistory) ListReports(context.Context, string, ReportFilter, string, int) ([]StoredReport, string, error) {
	return nil, "", errors.New("down")
}
func (e *errHistory) WithdrawReports(context.Context, string, ReportFilter) (int64, error) {
	return 0, errors.New("down")
}

func TestScorerHistory(t *testing.T) {
	ctx := context.Background()
	now := t0
	h := NewMemoryHistory(0, 0)
	s := New(testConfig(t, nil), Deps{History: h, Now: func() time.Time { return now }})
	assess := func(in Input) Assessment { return s.Assess(ctx, testTenant, in, okResult(in.Email)) }

	t.Run("first sighting", func(t *testing.T) {
		a := assess(Input{Email: "ann.lee@newdomain.example", IP: "73.1.1.1"})
		if a.EAM == nil || a.DAM == nil {
			t.Fatal("eam/dam missing")
		}
		want := Activity{DateFirstSeen: "2026-03-02", Longevity: 0, Velocity: 0, Popularity: 0}
		if *a.EAM != want || *a.DAM != want {
			t.Errorf("eam %+v dam %+v, want %+v", *a.EAM, *a.DAM, want)
		}
		checkCodes(t, a, []string{ReasonDomainNew}, []string{ReasonEmailVelocity, ReasonEmailEstablished})
	})
	t.Run("tumbling", func(t *testing.T) {
		var a Assessment
		for i, e := range []string{"john.smith+a@gmail.com", "johnsmith+b@gmail.com", "john.smith7@gmail.com", "jo.hn.smith@gmail.com", "johnsmith99@gmail.com"} {
			a = assess(Input{Email: e})
			want := []int{1, 1, 2, 3, 3}[i]
			if a.Risk.TumblingRisk != want {
				t.Errorf("%s: tumbling_risk %d, want %d", e, a.Risk.TumblingRisk, want)
			}
		}
		for _, r := range a.Reasons {
			if r.Code == ReasonEmailTumbling && r.Points != 2*s.Config().Weights[ReasonEmailTumbling] {
				t.Errorf("tumbling points %d", r.Points)
			}
		}
		checkCodes(t, a, []string{ReasonEmailTumbling}, nil)
	})
	t.Run("ip velocity", func(t *testing.T) {
		var a Assessment
		for i := range 6 {
			a = assess(Input{Email: fmt.Sprintf("user%c@yahoo.com", 'a'+i), IP: "8.8.4.4"})
			if i < 5 && hasCode(a, ReasonIPVelocity) {
				t.Fatalf("ip_velocity after %d addresses", i)
			}
		}
		checkCodes(t, a, []string{ReasonIPVelocity}, nil)
	})
	t.Run("phone velocity", func(t *testing.T) {
		var a Assessment
		for i := range 4 {
			a = assess(Input{Email: fmt.Sprintf("p%c@yahoo.com", 'a'+i), Phone: "+1 201 555 0123"})
		}
		checkCodes(t, a, []string{ReasonPhoneVelocity}, nil)
	})
	t.Run("email velocity and eam", func(t *testing.T) {
		var a Assessment
		for range 6 {
			a = assess(Input{Email: "repeat@gmail.com"})
		}
		checkCodes(t, a, []string{ReasonEmailVelocity}, nil)
		if a.EAM.Velocity != 3 || a.EAM.Popularity != 3 { // 5 earlier events: 4-7 -> 3
			t.Errorf("eam = %+v", *a.EAM)
		}
		now = now.Add(100 * 24 * time.Hour)
		a = assess(Input{Email: "repeat@gmail.com"})
		if a.EAM.Longevity != 2 || a.EAM.Velocity != 0 || a.EAM.DateFirstSeen != "2026-03-02" {
			t.Errorf("eam after 100 days = %+v", *a.EAM)
		}
		checkCodes(t, a, []string{ReasonEmailEstablished}, []string{ReasonEmailVelocity, ReasonDomainNew})
	})
	t.Run("no record", func(t *testing.T) {
		h2 := NewMemoryHistory(0, 0)
		s2 := New(DefaultConfig(), Deps{History: h2, NoRecord: true})
		s2.Assess(ctx, testTenant, Input{Email: "a@b.com"}, okResult("a@b.com"))
		if h2.Len() != 0 {
			t.Errorf("recorded with NoRecord")
		}
	})
	t.Run("history down", func(t *testing.T) {
		eh := &errHistory{}
		s3 := New(DefaultConfig(), Deps{History: eh})
		a := s3.Assess(ctx, testTenant, Input{Email: "a+x@b.com"}, okResult("a+x@b.com"))
		if a.EAM != nil || a.DAM != nil || a.Risk.TumblingRisk != 1 || eh.records != 1 {
			t.Errorf("eam %v dam %v tumbling %d records %d", a.EAM, a.DAM, a.Risk.TumblingRisk, eh.records)
		}
	})
	t.Run("digests", func(t *testing.T) {
		// History sees keyed digests, never the values.
		h3 := NewMemoryHistory(0, 0)
		s4 := New(DefaultConfig(), Deps{History: h3, HistoryKey: []byte("k")})
		s4.Assess(ctx, testTenant, Input{Email: "ann@gmail.com", IP: "8.8.8.8", Phone: "+12015550123"}, okResult("ann@gmail.com"))
		h3.mu.Lock()
		defer h3.mu.Unlock()
		for id := range h3.tenants[testTenant] {
			if len(id.key) != 22 {
				t.Errorf("key %q is not a digest", id.key)
			}
		}
		if digest([]byte("k"), 'e', "x") == digest([]byte("other"), 'e', "x") {
			t.Error("digest ignores the key")
		}
	})
}

func TestScale10(t *testing.T) {
	for n, want := range map[int64]int{0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 7: 3, 8: 4, 511: 9, 512: 10, 1 << 40: 10} {
		if got := scale10(n); got != want {
			t.Errorf("scale10(%d) = %d, want %d", n, got, want)
		}
	}
	days := [3]int{1, 90, 365}
	for age, want := range map[time.Duration]int{0: 0, 23 * time.Hour: 0, 24 * time.Hour: 1, 89 * 24 * time.Hour: 1, 90 * 24 * time.Hour: 2, 400 * 24 * time.Hour: 3} {
		if got := longevity(t0.Add(-age), t0, days); got != want {
			t.Errorf("longevity(%v) = %d, want %d", age, got, want)
		}
	}
	if longevity(time.Time{}, t0, days) != 0 {
		t.Error("never seen has longevity")
	}
}
