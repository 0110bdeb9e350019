package fraud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/refdata/phone"
)

// Fraud feedback: cases that a client reports as fraud (POST /feedback/v1).
// Each report is kept in the History under the same digests as queries, so
// that GET /fr for a reported address, IP or phone says so (reasons
// email_reported, ip_reported, phone_reported) and scores it.

// ReportTypes are the fraud types a report may carry.
var ReportTypes = []string{
	"account_takeover", "bot", "chargeback", "fake_account", "identity_theft",
	"payment_fraud", "promotion_abuse", "spam", "other",
}

// ReportInput is one reported case as a client gives it. Email and Type
// are required; IP and Phone are optional; Country (ISO 3166 alpha-2)
// reads a national-format Phone; At is when the fraud happened (the time
// of the report when zero).
type ReportInput struct {
	Email, Type, IP, Phone, Country string
	At                              time.Time
}

// Report is a reported case as a History keeps it: the digests of the
// address, IP and phone (Domain and Tumbling are not used), the type and
// the time.
type Report struct {
	Keys
	Type string
	At   time.Time
}

// ReportError says which field of a ReportInput is unusable; it never
// carries the value.
type ReportError struct {
	Field  string // "email", "fraud_type", "ip", "phone", "country" or "date"
	Reason string
}

func (e *ReportError) Error() string { return "fraud: report: " + e.Field + ": " + e.Reason }

// maxReportAge bounds how far back a report's date may go, and
// maxReportSkew how far ahead of the clock.
const (
	maxReportAge  = 20 * 365 * 24 * time.Hour
	maxReportSkew = 24 * time.Hour
)

// NormalizeReportType returns the ReportTypes value a client's type names
// (case, spaces and hyphens aside), or false.
func NormalizeReportType(s string) (string, bool) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.NewReplacer(" ", "_", "-", "_").Replace(t)
	return t, slices.Contains(ReportTypes, t)
}

// ReportOf checks in and returns the report Assess would find: the
// address is parsed as the verifier parses it (a syntactically valid
// address, its domain in ASCII), the IP as GET /fr reads it, the phone in
// E.164 as GET /fr keys it.
func (s *Scorer) ReportOf(in ReportInput) (Report, error) {
	ev := verify.CheckSyntax(strings.TrimSpace(in.Email))
	if ev.Code != verify.CodeValidSyntax && ev.Code != verify.CodeInvalidTLD || ev.Local == "" || ev.Domain == "" {
		return Report{}, &ReportError{"email", "not an email address"}
	}
	typ, ok := NormalizeReportType(in.Type)
	if !ok {
		return Report{}, &ReportError{"fraud_type", "not one of " + strings.Join(ReportTypes, ", ")}
	}
	key := s.deps.HistoryKey
	r := Report{Type: typ, At: in.At}
	r.Email = digest(key, 'e', strings.ToLower(ev.Local)+"@"+ev.Domain)
	if strings.TrimSpace(in.IP) != "" {
		ip, ok := parseIP(in.IP)
		if !ok {
			return Report{}, &ReportError{"ip", "not an IP address"}
		}
		r.IP = digest(key, 'i', ip.WithZone("").String())
	}
	region := ""
	if strings.TrimSpace(in.Country) != "" {
		c, ok := normCountry(in.Country)
		if !ok {
			return Report{}, &ReportError{"country", "not an ISO 3166 alpha-2 code"}
		}
		region = c
	}
	if strings.TrimSpace(in.Phone) != "" {
		if region == "" {
			region = s.cfg.Load().DefaultPhoneRegion
		}
		n, err := phone.Parse(in.Phone, region)
		if err != nil || !n.Valid {
			return Report{}, &ReportError{"phone", "not a valid phone number"}
		}
		r.Phone = digest(key, 'p', n.E164)
	}
	now := s.deps.Now()
	switch {
	case r.At.IsZero():
		r.At = now
	case r.At.After(now.Add(maxReportSkew)):
		return Report{}, &ReportError{"date", "in the future"}
	case r.At.Before(now.Add(-maxReportAge)):
		return Report{}, &ReportError{"date", "more than 20 years ago"}
	}
	return r, nil
}

// Record stores reports in the History; without a History it fails.
func (s *Scorer) Record(ctx context.Context, reports []Report) error {
	if s.deps.History == nil {
		return errors.New("fraud: no history to record reports in")
	}
	if len(reports) == 0 {
		return nil
	}
	if err := s.deps.History.Report(ctx, reports); err != nil {
		return fmt.Errorf("fraud: record reports: %w", err)
	}
	return nil
}

// reportSignals adds the reasons of reported parties.
func (a *assessor) reportSignals(st Stats, k Keys) {
	if st.EmailReports > 0 {
		a.add(ReasonEmailReported)
	}
	if k.IP != "" && st.IPReports > 0 {
		a.add(ReasonIPReported)
	}
	if k.Phone != "" && st.PhoneReports > 0 {
		a.add(ReasonPhoneReported)
	}
}
