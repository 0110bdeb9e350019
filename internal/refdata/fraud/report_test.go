package fraud

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// stores are the History implementations the scorer tests run against.
var stores = []struct {
	name    string
	history func(t *testing.T) History
}{
	{"memory", func(*testing.T) History { return NewMemoryHistory(0, 0) }},
	{"postgres", func(t *testing.T) History { h, _ := pgHistory(t, pgPool(t)); return h }},
	{"redis", func(t *testing.T) History { return redisHistory(t) }},
}

// report records one report of in by tenant, dated at.
func report(t *testing.T, s *Scorer, tenant string, in ReportInput) {
	t.Helper()
	r, err := s.ReportOf(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Report(context.Background(), tenant, []Report{r}); err != nil {
		t.Fatal(err)
	}
}

func reasonOf(a Assessment, code string) (Reason, bool) {
	for _, r := range a.Reasons {
		if r.Code == code {
			return r, true
		}
	}
	return Reason{}, false
}

// TestReportsChangeAssessment: after a tenant's report, its own /fr of the
// reported address, IP and phone names each in its reasons (source own)
// and scores them; another tenant's answers do not move.
func TestReportsChangeAssessment(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := New(DefaultConfig(), Deps{History: tc.history(t), Now: fixedClock(t0), NoRecord: true})
			in := Input{Email: "Mallory@Shop.example.com", IP: "73.1.1.9", Phone: "+1 415 555 2671"}
			assess := func(tenant string, in Input) Assessment { return s.Assess(ctx, tenant, in, okResult(in.Email)) }
			before, otherBefore := assess("acme", in), assess("globex", in)
			reported := []string{ReasonEmailReported, ReasonIPReported, ReasonPhoneReported}
			network := []string{ReasonEmailReportedNetwork, ReasonIPReportedNetwork, ReasonPhoneReportedNetwork}
			checkCodes(t, before, nil, append(reported, network...))

			for _, r := range []ReportInput{
				// The address as another client writes it; the phone in national form.
				{Email: " mallory@SHOP.example.com", Type: "Chargeback", IP: "73.1.1.9", Phone: "(415) 555-2671", At: t0.Add(-48 * time.Hour)},
				{Email: "other@example.org", Type: "account-takeover"},
			} {
				report(t, s, "acme", r)
			}
			after := assess("acme", in)
			checkCodes(t, after, reported, network)
			for _, c := range reported {
				if r, _ := reasonOf(after, c); r.Source != SourceOwn {
					t.Errorf("%s: source %q, want own", c, r.Source)
				}
			}
			w := DefaultConfig().Weights
			if want := min(100, before.Risk.Score+w[ReasonEmailReported]+w[ReasonIPReported]+w[ReasonPhoneReported]); after.Risk.Score != want {
				t.Errorf("score %d -> %d, want %d", before.Risk.Score, after.Risk.Score, want)
			}
			if after.Assessment != LikelyFraud {
				t.Errorf("assessment %s after reports", after.Assessment)
			}
			// The address alone still says so; another IP and phone do not.
			only := assess("acme", Input{Email: in.Email, IP: "73.1.1.10", Phone: "+1 415 555 2672"})
			checkCodes(t, only, []string{ReasonEmailReported}, []string{ReasonIPReported, ReasonPhoneReported})
			// A clean address from the reported IP: ip_reported only.
			fromIP := assess("acme", Input{Email: "carol@example.net", IP: "73.1.1.9"})
			checkCodes(t, fromIP, []string{ReasonIPReported}, []string{ReasonEmailReported, ReasonPhoneReported})

			// One tenant's report moves no other tenant's answer.
			other := assess("globex", in)
			checkCodes(t, other, nil, append(reported, network...))
			if other.Risk.Score != otherBefore.Risk.Score || other.Assessment != otherBefore.Assessment {
				t.Errorf("globex: %d %s -> %d %s after acme's report", otherBefore.Risk.Score, otherBefore.Assessment, other.Risk.Score, other.Assessment)
			}
		})
	}
}

// TestNetworkReports: other tenants' reports count only from three
// distinct tenants on, weighted by how many and decayed by age, as network
// reasons; the reporters' own answers count their own reports in full and
// the others' as the network.
func TestNetworkReports(t *testing.T) {
	midnight := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // ages are whole days
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := New(DefaultConfig(), Deps{History: tc.history(t), Now: fixedClock(midnight), NoRecord: true})
			in := Input{Email: "sam.serial@example.net", IP: "81.2.69.160", Phone: "+44 7400 123456"}
			points := func(tenant string) [6]int {
				a := s.Assess(ctx, tenant, in, okResult(in.Email))
				var out [6]int
				for i, c := range []string{ReasonEmailReported, ReasonIPReported, ReasonPhoneReported,
					ReasonEmailReportedNetwork, ReasonIPReportedNetwork, ReasonPhoneReportedNetwork} {
					if r, ok := reasonOf(a, c); ok {
						out[i] = r.Points
						if want := reasonSources[c]; r.Source != want {
							t.Errorf("%s: source %q, want %q", c, r.Source, want)
						}
					}
				}
				return out
			}
			rep := func(tenant string, daysAgo int) {
				report(t, s, tenant, ReportInput{Email: in.Email, Type: "payment_fraud", IP: in.IP, Phone: in.Phone, At: midnight.AddDate(0, 0, -daysAgo)})
			}
			// Half-life 90 days, full weight at 5 tenants, at least 3.
			rep("acme", 0)
			rep("globex", 90)
			if got := points("umbrella"); got != [6]int{} {
				t.Errorf("two other tenants: %v, want nothing", got)
			}
			rep("initech", 180)
			// 1 + 1/2 + 1/4 = 1.75 of 5 tenants: 45*0.35 = 15.75, 25*0.35 = 8.75.
			if got, want := points("umbrella"), [6]int{0, 0, 0, 16, 9, 9}; got != want {
				t.Errorf("three tenants, decayed: %v, want %v", got, want)
			}
			// acme: its own report in full; the two others are not enough.
			if got, want := points("acme"), [6]int{45, 25, 25, 0, 0, 0}; got != want {
				t.Errorf("acme: %v, want %v", got, want)
			}
			// Reporting again refreshes a tenant's date; one tenant counts once.
			rep("globex", 0)
			rep("globex", 0)
			rep("initech", 0)
			// 3 fresh tenants: 3/5 of the weight.
			if got, want := points("umbrella"), [6]int{0, 0, 0, 27, 15, 15}; got != want {
				t.Errorf("three fresh tenants: %v, want %v", got, want)
			}
			rep("hooli", 0)
			rep("wonka", 0)
			rep("stark", 0)
			// Six: full weight, never more.
			if got, want := points("umbrella"), [6]int{0, 0, 0, 45, 25, 25}; got != want {
				t.Errorf("six tenants: %v, want %v", got, want)
			}
			if got, want := points("acme"), [6]int{45, 25, 25, 45, 25, 25}; got != want {
				t.Errorf("acme with five others: %v, want %v", got, want)
			}
		})
	}
}

// TestReportHorizon: a report dated beyond the horizon is refused, and one
// that ages beyond it stops counting.
func TestReportHorizon(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			now := t0
			s := New(DefaultConfig(), Deps{History: tc.history(t), Now: func() time.Time { return now }, NoRecord: true})
			old := ReportInput{Email: "old.case@example.net", Type: "chargeback", At: time.Date(2008, 5, 1, 0, 0, 0, 0, time.UTC)}
			var re *ReportError
			if _, err := s.ReportOf(old); !errors.As(err, &re) || re.Field != "date" {
				t.Fatalf("a 2008 report: %v", err)
			}
			report(t, s, "acme", ReportInput{Email: "aging@example.net", Type: "chargeback", At: t0.AddDate(0, 0, -364)})
			a := s.Assess(ctx, "acme", Input{Email: "aging@example.net"}, okResult("aging@example.net"))
			checkCodes(t, a, []string{ReasonEmailReported}, nil)
			now = t0.AddDate(0, 0, 2)
			a = s.Assess(ctx, "acme", Input{Email: "aging@example.net"}, okResult("aging@example.net"))
			checkCodes(t, a, nil, []string{ReasonEmailReported})
		})
	}
}

// TestQueriesTenantScoped: one tenant's queries move no other tenant's
// velocity, tumbling or activity.
func TestQueriesTenantScoped(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			now := t0
			s := New(DefaultConfig(), Deps{History: tc.history(t), Now: func() time.Time { return now }})
			assess := func(tenant, email, ip string) Assessment {
				now = now.Add(time.Second)
				return s.Assess(ctx, tenant, Input{Email: email, IP: ip}, okResult(email))
			}
			for range 5 {
				assess("globex", "carol.velo@gmail.com", "")
			}
			for i := range 5 {
				assess("globex", fmt.Sprintf("user%d.velo@yahoo.com", i), "203.0.113.77")
			}
			for _, v := range []string{"john.velo+a@gmail.com", "johnvelo+b@gmail.com", "john.velo7@gmail.com"} {
				assess("globex", v, "")
			}
			velocity := []string{ReasonEmailVelocity, ReasonIPVelocity, ReasonEmailTumbling, ReasonEmailEstablished, ReasonEmailVelocityNetwork}
			for _, q := range [][2]string{{"carol.velo@gmail.com", ""}, {"other.velo@yahoo.com", "203.0.113.77"}, {"jo.hn.velo@gmail.com", ""}} {
				a := assess("acme", q[0], q[1])
				checkCodes(t, a, nil, velocity)
				if a.EAM == nil || a.EAM.Popularity != 0 || a.EAM.Velocity != 0 || a.Risk.TumblingRisk > 1 {
					t.Errorf("acme's %s: eam %+v dam %+v tumbling %d", q[0], a.EAM, a.DAM, a.Risk.TumblingRisk)
				}
			}
			// globex itself sees its own traffic.
			checkCodes(t, assess("globex", "carol.velo@gmail.com", ""), []string{ReasonEmailVelocity}, nil)
			checkCodes(t, assess("globex", "other.velo@yahoo.com", "203.0.113.77"), []string{ReasonIPVelocity}, nil)
			checkCodes(t, assess("globex", "jo.hn.velo@gmail.com", ""), []string{ReasonEmailTumbling}, nil)
		})
	}
}

// TestNetworkVelocity: an address other tenants asked about recently
// counts from three of them on, as email_velocity_network, weighted by how
// many; the asking tenant's own queries and older ones do not count.
func TestNetworkVelocity(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			now := t0
			s := New(DefaultConfig(), Deps{History: tc.history(t), Now: func() time.Time { return now }})
			in := Input{Email: "serial.net@gmail.com"}
			points := func(tenant string) int {
				now = now.Add(time.Hour)
				r, _ := reasonOf(s.Assess(ctx, tenant, in, okResult(in.Email)), ReasonEmailVelocityNetwork)
				if r.Points != 0 && r.Source != SourceNetwork {
					t.Errorf("source %q", r.Source)
				}
				return r.Points
			}
			for i, want := range []int{0, 0, 0, 0, 15, 20, 25, 25} {
				tenant := []string{"acme", "acme", "globex", "initech", "umbrella", "hooli", "wonka", "stark"}[i]
				if got := points(tenant); got != want {
					t.Errorf("%s, after %d queries: %d points, want %d", tenant, i, got, want)
				}
			}
			// A week and more after the last: nothing.
			now = now.Add(7 * 24 * time.Hour)
			if got := points("acme"); got != 0 {
				t.Errorf("after the window: %d points", got)
			}
		})
	}
}

func TestReportOf(t *testing.T) {
	s := New(DefaultConfig(), Deps{History: NewMemoryHistory(0, 0), Now: func() time.Time { return t0 }})
	for _, tc := range []struct {
		name  string
		in    ReportInput
		field string
	}{
		{"ok", ReportInput{Email: "a@example.com", Type: "promotion abuse", IP: "2001:db8::1", Phone: "020 7946 0958", Country: "gb"}, ""},
		{"no email", ReportInput{Type: "bot"}, "email"},
		{"not an email", ReportInput{Email: "a@@example.com", Type: "bot"}, "email"},
		{"unknown type", ReportInput{Email: "a@example.com", Type: "suspicious"}, "fraud_type"},
		{"bad ip", ReportInput{Email: "a@example.com", Type: "bot", IP: "300.1.1.1"}, "ip"},
		{"bad phone", ReportInput{Email: "a@example.com", Type: "bot", Phone: "12"}, "phone"},
		{"bad country", ReportInput{Email: "a@example.com", Type: "bot", Phone: "0207 946 0958", Country: "ZZ"}, "country"},
		{"future", ReportInput{Email: "a@example.com", Type: "bot", At: t0.Add(72 * time.Hour)}, "date"},
		{"beyond the horizon", ReportInput{Email: "a@example.com", Type: "bot", At: t0.AddDate(-1, 0, -1)}, "date"},
		{"ancient", ReportInput{Email: "a@example.com", Type: "bot", At: t0.AddDate(-21, 0, 0)}, "date"},
	} {
		r, err := s.ReportOf(tc.in)
		var re *ReportError
		switch {
		case tc.field == "" && (err != nil || r.Email == "" || r.IP == "" || r.Phone == "" || !r.At.Equal(reportDay(t0)) || r.Type != "promotion_abuse"):
			t.Errorf("%s: %+v, %v", tc.name, r, err)
		case tc.field != "" && (!errors.As(err, &re) || re.Field != tc.field):
			t.Errorf("%s: err %v, want a %s error", tc.name, err, tc.field)
		}
	}
	// A hand-built configuration without the trust model gets the default one.
	hand := New(Config{Threshold: 50, Weights: map[string]int{}}, Deps{History: NewMemoryHistory(0, 0), Now: fixedClock(t0)})
	if _, err := hand.ReportOf(ReportInput{Email: "a@example.com", Type: "bot", At: t0.Add(-48 * time.Hour)}); err != nil {
		t.Errorf("a hand-built config refuses a report of two days ago: %v", err)
	}
	if c := hand.Config(); c.Network != DefaultConfig().Network || c.Feedback != DefaultConfig().Feedback {
		t.Errorf("hand-built config: network %+v feedback %+v", c.Network, c.Feedback)
	}
	ctx := context.Background()
	if _, err := New(DefaultConfig(), Deps{}).BeginFeedback(ctx, "acme"); !errors.Is(err, ErrFeedbackOff) {
		t.Errorf("feedback without a history: %v", err)
	}
	if _, err := New(DefaultConfig(), Deps{History: NewMemoryHistory(0, 0), NoFeedback: true}).BeginFeedback(ctx, "acme"); !errors.Is(err, ErrFeedbackOff) {
		t.Errorf("feedback with NoFeedback: %v", err)
	}
	if _, err := s.BeginFeedback(ctx, ""); err == nil {
		t.Error("feedback without a tenant")
	}
}

// TestFeedbackQuota: a tenant's file beyond its quota is refused whole and
// another tenant's is not; feedback goes to the store in bounded batches.
func TestFeedbackQuota(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := DefaultConfig()
			cfg.Feedback.TenantQuota = feedbackBatch + 10
			h := &countingHistory{History: tc.history(t)}
			s := New(cfg, Deps{History: h, Now: fixedClock(t0), NoRecord: true})
			file := func(tenant, prefix string, n int) error {
				f, err := s.BeginFeedback(ctx, tenant)
				if err != nil {
					return err
				}
				defer f.Abort()
				for i := range n {
					r, err := s.ReportOf(ReportInput{Email: fmt.Sprintf("%s%d@example.net", prefix, i), Type: "spam"})
					must(t, err)
					r.Line = i + 2
					if err := f.Add(ctx, r); err != nil {
						return err
					}
				}
				return f.Commit(ctx)
			}
			must(t, file("acme", "a", feedbackBatch+5))
			if h.maxBatch != feedbackBatch {
				t.Errorf("largest batch %d, want %d", h.maxBatch, feedbackBatch)
			}
			var q *QuotaError
			if err := file("acme", "b", 6); !errors.As(err, &q) || q.Held != feedbackBatch+5 || q.Quota != feedbackBatch+10 {
				t.Fatalf("over the quota: %v", err)
			}
			must(t, file("globex", "c", 10))
			a := s.Assess(ctx, "acme", Input{Email: "b0@example.net"}, okResult("b0@example.net"))
			checkCodes(t, a, nil, []string{ReasonEmailReported})
			a = s.Assess(ctx, "globex", Input{Email: "c9@example.net"}, okResult("c9@example.net"))
			checkCodes(t, a, []string{ReasonEmailReported}, nil)
		})
	}
}

// countingHistory records the largest batch handed to the store.
type countingHistory struct {
	History
	maxBatch int
}

func (c *countingHistory) BeginReports(ctx context.Context, tenant, id string, received time.Time, quota int64) (ReportBatch, error) {
	b, err := c.History.BeginReports(ctx, tenant, id, received, quota)
	if err != nil {
		return nil, err
	}
	return countingBatch{b, c}, nil
}

type countingBatch struct {
	ReportBatch
	c *countingHistory
}

func (b countingBatch) Add(ctx context.Context, reports []Report) error {
	b.c.maxBatch = max(b.c.maxBatch, len(reports))
	return b.ReportBatch.Add(ctx, reports)
}
