package fraud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/refdata/phone"
)

// Fraud feedback: cases that a client reports as fraud (POST /feedback/v1).
// Each report is kept in the History under the same digests as queries,
// with the tenant that reported it, the feedback file it came in and its
// line there, so that a tenant can list and withdraw its own reports. GET
// /fr for a reported address, IP or phone says so: the asking tenant's own
// reports give email_reported, ip_reported and phone_reported; other
// tenants' reports give the _network reasons, and only when enough of them
// agree (FeedbackConfig).

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
// address, IP and phone (Domain and Tumbling are not used), the type, the
// day of the fraud (UTC midnight: reports are dated to the day), and where
// it came from.
type Report struct {
	Keys
	Type string
	At   time.Time
	// Line is the report's line in its feedback file (the header is line
	// 1); with the file's ID it names the report to its tenant.
	Line int
	// ReferenceID is the client's own case reference, as given (at most
	// MaxReferenceID bytes), so that it can find its reports again.
	ReferenceID string
}

// MaxReferenceID bounds Report.ReferenceID.
const MaxReferenceID = 128

// StoredReport is a report as ListReports returns it.
type StoredReport struct {
	Report
	FeedbackID string    // the file it came in
	Received   time.Time // when that file was recorded
}

// ReportFilter selects a tenant's reports. Zero fields match all; Line
// needs FeedbackID.
type ReportFilter struct {
	FeedbackID string
	Line       int
	// Email is the digest of a reported address (Scorer.ReportFilter makes
	// it from the address).
	Email string
}

func (f ReportFilter) match(r *StoredReport) bool {
	return (f.FeedbackID == "" || r.FeedbackID == f.FeedbackID) && (f.Line == 0 || r.Line == f.Line) &&
		(f.Email == "" || r.Email == f.Email)
}

// ReportStore keeps fraud reports by tenant. A tenant's reports are
// visible to it alone (ListReports, WithdrawReports); Stats sums them up
// for every tenant without naming any.
type ReportStore interface {
	// BeginReports starts storing one feedback file of tenant. Nothing of
	// it counts until Commit; Abort, or a failed Add or Commit, leaves
	// nothing. quota bounds the reports tenant keeps, this file included:
	// Add or Commit fail with a *QuotaError beyond it.
	BeginReports(ctx context.Context, tenant, feedbackID string, received time.Time, quota int64) (ReportBatch, error)
	// ListReports returns up to limit of tenant's reports matching f, by
	// file (oldest first) and line, after the cursor after ("" from the
	// start), and the cursor of the next page ("" at the end).
	ListReports(ctx context.Context, tenant string, f ReportFilter, after string, limit int) ([]StoredReport, string, error)
	// WithdrawReports deletes tenant's reports matching f and returns how
	// many; they stop counting at once.
	WithdrawReports(ctx context.Context, tenant string, f ReportFilter) (int64, error)
}

// ReportBatch is one feedback file being stored.
type ReportBatch interface {
	// Add stores reports (a bounded batch; the slice may be reused after
	// Add returns).
	Add(ctx context.Context, reports []Report) error
	// Commit makes the file count, all of it at once.
	Commit(ctx context.Context) error
	// Abort drops what Add stored; after Commit it does nothing.
	Abort(ctx context.Context) error
}

// QuotaError refuses a feedback file that would take its tenant beyond
// FeedbackConfig.TenantQuota.
type QuotaError struct {
	Quota int64 // the tenant's quota
	Held  int64 // reports the tenant kept before this file
	Adds  int64 // reports of this file read so far
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("fraud: feedback quota: the tenant keeps %d reports of at most %d, and the file adds at least %d", e.Held, e.Quota, e.Adds)
}

// ErrFeedbackOff is returned by BeginFeedback when the scorer keeps no
// reports (Deps.NoFeedback, or no History).
var ErrFeedbackOff = errors.New("fraud: feedback is not kept here: no durable, shared fraud history is configured")

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
	case r.At.Before(now.Add(-time.Duration(s.cfg.Load().Feedback.Horizon))):
		return Report{}, &ReportError{"date", "older than the feedback horizon"}
	}
	r.At = reportDay(r.At)
	return r, nil
}

// reportDay is the UTC day of t, at midnight: reports are dated to the
// day, in every store alike.
func reportDay(t time.Time) time.Time {
	return t.UTC().Truncate(24 * time.Hour)
}

// firstDay is the first report day at or after since: a report counts
// from ReportsSince when its day is not before it.
func firstDay(since time.Time) time.Time {
	d := reportDay(since)
	if d.Before(since) {
		d = d.Add(24 * time.Hour)
	}
	return d
}

// feedbackBatch is how many reports a Feedback hands its store at once:
// the memory of one file being recorded stays this many reports, however
// long the file.
const feedbackBatch = 2000

// Feedback records one feedback file of one tenant: Add each accepted
// report, then Commit (all of them count at once) or Abort (none).
type Feedback struct {
	id    string
	batch ReportBatch
	buf   []Report
	n     int64
	done  bool
}

// BeginFeedback starts recording a feedback file of tenant, under a new
// random feedback ID, within the tenant's quota (FeedbackConfig.TenantQuota).
func (s *Scorer) BeginFeedback(ctx context.Context, tenant string) (*Feedback, error) {
	if s.deps.History == nil || s.deps.NoFeedback {
		return nil, ErrFeedbackOff
	}
	if tenant == "" {
		return nil, errors.New("fraud: feedback needs a tenant")
	}
	id := newFeedbackID()
	// To the millisecond, as listing cursors carry it.
	received := s.deps.Now().UTC().Truncate(time.Millisecond)
	b, err := s.deps.History.BeginReports(ctx, tenant, id, received, s.cfg.Load().Feedback.TenantQuota)
	if err != nil {
		return nil, fmt.Errorf("fraud: begin feedback: %w", err)
	}
	return &Feedback{id: id, batch: b, buf: make([]Report, 0, feedbackBatch)}, nil
}

// newFeedbackID returns "fb_" and 96 random bits in hex: it tells nothing
// of how many files anyone sent.
func newFeedbackID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "fb_" + hex.EncodeToString(b[:])
}

// ValidFeedbackID reports whether id has the form of a feedback file's ID
// ("fb_" and 24 lower-case hex digits).
func ValidFeedbackID(id string) bool {
	h, ok := strings.CutPrefix(id, "fb_")
	if !ok || len(h) != 24 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ID is the feedback file's ID.
func (f *Feedback) ID() string { return f.id }

// Count is the number of reports added.
func (f *Feedback) Count() int64 { return f.n }

// Add records r (once a batch is full, in the store, not yet counting).
func (f *Feedback) Add(ctx context.Context, r Report) error {
	if len(r.ReferenceID) > MaxReferenceID {
		r.ReferenceID = strings.ToValidUTF8(r.ReferenceID[:MaxReferenceID], "")
	}
	f.buf = append(f.buf, r)
	f.n++
	if len(f.buf) < feedbackBatch {
		return nil
	}
	return f.flush(ctx)
}

func (f *Feedback) flush(ctx context.Context) error {
	if len(f.buf) == 0 {
		return nil
	}
	err := f.batch.Add(ctx, f.buf)
	f.buf = f.buf[:0]
	if err != nil {
		return fmt.Errorf("fraud: record feedback: %w", err)
	}
	return nil
}

// Commit makes every added report count at once.
func (f *Feedback) Commit(ctx context.Context) error {
	if err := f.flush(ctx); err != nil {
		return err
	}
	if err := f.batch.Commit(ctx); err != nil {
		return fmt.Errorf("fraud: record feedback: %w", err)
	}
	f.done = true
	return nil
}

// Abort drops the file; after Commit it does nothing. It runs with a
// context of its own (the request's may be what ended).
func (f *Feedback) Abort() {
	if f.done {
		return
	}
	f.done = true
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	_ = f.batch.Abort(ctx)
}

// abortTimeout bounds the clean-up of an aborted feedback file.
const abortTimeout = 30 * time.Second

// Report records reports as one feedback file of tenant and returns its
// ID: BeginFeedback, Add, Commit.
func (s *Scorer) Report(ctx context.Context, tenant string, reports []Report) (string, error) {
	f, err := s.BeginFeedback(ctx, tenant)
	if err != nil {
		return "", err
	}
	defer f.Abort()
	for _, r := range reports {
		if err := f.Add(ctx, r); err != nil {
			return "", err
		}
	}
	return f.id, f.Commit(ctx)
}

// ReportFilter returns the filter of tenant's reports of one feedback
// file (feedbackID, "" for all), one line of it (0 for all) and one
// address (email, "" for all); the address is read as ReportOf reads it.
func (s *Scorer) ReportFilter(feedbackID string, line int, email string) (ReportFilter, error) {
	f := ReportFilter{FeedbackID: feedbackID, Line: line}
	if line != 0 && feedbackID == "" {
		return ReportFilter{}, &ReportError{"line", "needs a feedback_id"}
	}
	if strings.TrimSpace(email) != "" {
		ev := verify.CheckSyntax(strings.TrimSpace(email))
		if ev.Code != verify.CodeValidSyntax && ev.Code != verify.CodeInvalidTLD || ev.Local == "" || ev.Domain == "" {
			return ReportFilter{}, &ReportError{"email", "not an email address"}
		}
		f.Email = digest(s.deps.HistoryKey, 'e', strings.ToLower(ev.Local)+"@"+ev.Domain)
	}
	return f, nil
}

// ListReports returns tenant's own reports matching f (see
// ReportStore.ListReports).
func (s *Scorer) ListReports(ctx context.Context, tenant string, f ReportFilter, after string, limit int) ([]StoredReport, string, error) {
	if s.deps.History == nil || s.deps.NoFeedback {
		return nil, "", ErrFeedbackOff
	}
	return s.deps.History.ListReports(ctx, tenant, f, after, limit)
}

// WithdrawReports deletes tenant's own reports matching f.
func (s *Scorer) WithdrawReports(ctx context.Context, tenant string, f ReportFilter) (int64, error) {
	if s.deps.History == nil || s.deps.NoFeedback {
		return 0, ErrFeedbackOff
	}
	return s.deps.History.WithdrawReports(ctx, tenant, f)
}

// reportSignals adds the reasons of reported parties: the tenant's own
// reports in full, other tenants' (the network) when at least
// NetworkConfig.MinTenants of them agree, weighted by how many and decayed
// by age.
func (a *assessor) reportSignals(st Stats, k Keys, now time.Time) {
	for _, r := range []struct {
		rep          Reported
		has          bool
		own, network string
	}{
		{st.EmailReported, true, ReasonEmailReported, ReasonEmailReportedNetwork},
		{st.IPReported, k.IP != "", ReasonIPReported, ReasonIPReportedNetwork},
		{st.PhoneReported, k.Phone != "", ReasonPhoneReported, ReasonPhoneReportedNetwork},
	} {
		if !r.has {
			continue
		}
		if !r.rep.Own.IsZero() {
			a.add(r.own)
		}
		if share := networkShare(r.rep.Network, now, &a.cfg.Network); share > 0 {
			a.addPoints(r.network, int(math.Round(float64(a.cfg.Weights[r.network])*share)))
		}
	}
}

// networkShare is the share (0-1) of its weight a network reason gets from
// the newest report days of the other tenants that reported an
// identifier: 0 below MinTenants tenants, else the sum of
// 2^(-age/half_life) over them, divided by FullTenants, at most 1.
func networkShare(days []time.Time, now time.Time, c *NetworkConfig) float64 {
	if len(days) < c.MinTenants || c.MinTenants < 2 {
		return 0
	}
	sum := 0.0
	for _, d := range days {
		age := max(0, now.Sub(d))
		sum += math.Exp2(-float64(age) / float64(c.HalfLife))
	}
	return min(1, sum/float64(c.FullTenants))
}

// networkCount is the share (0-1) of its weight a network reason counted
// in tenants gets: 0 below MinTenants, else n/FullTenants, at most 1.
func networkCount(n int, c *NetworkConfig) float64 {
	if n < c.MinTenants || c.MinTenants < 2 {
		return 0
	}
	return min(1, float64(n)/float64(c.FullTenants))
}
