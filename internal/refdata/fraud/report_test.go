package fraud

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestReportsChangeAssessment: after a report, GET /fr's assessment of the
// reported address, IP and phone names each in its reasons and scores
// them, with the in-memory and the PostgreSQL history; other parties are
// untouched.
func TestReportsChangeAssessment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history func(t *testing.T) History
	}{
		{"memory", func(*testing.T) History { return NewMemoryHistory(0, 0) }},
		{"postgres", func(t *testing.T) History { h, _ := pgHistory(t, pgPool(t)); return h }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := New(DefaultConfig(), Deps{History: tc.history(t), Now: func() time.Time { return t0 }, NoRecord: true})
			in := Input{Email: "Mallory@Shop.example.com", IP: "73.1.1.9", Phone: "+1 415 555 2671"}
			assess := func(in Input) Assessment { return s.Assess(ctx, in, okResult(in.Email)) }
			before := assess(in)
			reported := []string{ReasonEmailReported, ReasonIPReported, ReasonPhoneReported}
			checkCodes(t, before, nil, reported)

			var reports []Report
			for _, r := range []ReportInput{
				// The address as another client writes it; the phone in national form.
				{Email: " mallory@SHOP.example.com", Type: "Chargeback", IP: "73.1.1.9", Phone: "(415) 555-2671", At: t0.Add(-48 * time.Hour)},
				{Email: "other@example.org", Type: "account-takeover"},
			} {
				rep, err := s.ReportOf(r)
				if err != nil {
					t.Fatal(err)
				}
				reports = append(reports, rep)
			}
			if err := s.Record(ctx, reports); err != nil {
				t.Fatal(err)
			}
			after := assess(in)
			checkCodes(t, after, reported, nil)
			w := DefaultConfig().Weights
			if want := min(100, before.Risk.Score+w[ReasonEmailReported]+w[ReasonIPReported]+w[ReasonPhoneReported]); after.Risk.Score != want {
				t.Errorf("score %d -> %d, want %d", before.Risk.Score, after.Risk.Score, want)
			}
			if after.Assessment != LikelyFraud {
				t.Errorf("assessment %s after reports", after.Assessment)
			}
			// The address alone still says so; another IP and phone do not.
			only := assess(Input{Email: in.Email, IP: "73.1.1.10", Phone: "+1 415 555 2672"})
			checkCodes(t, only, []string{ReasonEmailReported}, []string{ReasonIPReported, ReasonPhoneReported})
			// A clean address from the reported IP: ip_reported only.
			fromIP := assess(Input{Email: "carol@example.net", IP: "73.1.1.9"})
			checkCodes(t, fromIP, []string{ReasonIPReported}, []string{ReasonEmailReported, ReasonPhoneReported})
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
		{"ancient", ReportInput{Email: "a@example.com", Type: "bot", At: t0.AddDate(-21, 0, 0)}, "date"},
	} {
		r, err := s.ReportOf(tc.in)
		var re *ReportError
		switch {
		case tc.field == "" && (err != nil || r.Email == "" || r.IP == "" || r.Phone == "" || !r.At.Equal(t0) || r.Type != "promotion_abuse"):
			t.Errorf("%s: %+v, %v", tc.name, r, err)
		case tc.field != "" && (!errors.As(err, &re) || re.Field != tc.field):
			t.Errorf("%s: err %v, want a %s error", tc.name, err, tc.field)
		}
	}
	if err := New(DefaultConfig(), Deps{}).Record(context.Background(), []Report{{}}); err == nil {
		t.Error("Record without a history succeeded")
	}
}

func TestMemoryHistoryReportsBounded(t *testing.T) {
	h := NewMemoryHistory(3, 0)
	ctx := context.Background()
	if err := h.Report(ctx, []Report{{Keys: Keys{Email: "a", IP: "i"}}, {Keys: Keys{Email: "a"}}}); err != nil {
		t.Fatal(err)
	}
	// Queries do not evict reports.
	for i := range 10 {
		_ = h.Record(ctx, Event{Keys: Keys{Email: string(rune('k' + i))}, At: t0})
	}
	if err := h.Report(ctx, []Report{{Keys: Keys{Email: "b", IP: "j"}}}); !errors.Is(err, ErrReportsFull) {
		t.Fatalf("beyond the bound: %v", err)
	}
	st, _ := h.Stats(ctx, Keys{Email: "a", IP: "i"}, t0, time.Hour)
	if st.EmailReports != 2 || st.IPReports != 1 {
		t.Errorf("after a refused batch: %+v", st)
	}
}
