// Package evlist runs email verification over lists: the email_validation
// list service.
//
// Rows are verified in batches by a Checker (the verify.Engine's batch
// mode in production), and each row gets the result columns appended.
package evlist

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/emaildata/emaildata/internal/engine/verify"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/platform/services"
)

// Name is the service's name in lists (EmailList spec.service, the REST
// API's service parameter).
const Name = services.EmailValidation

// Columns appended to every row, after the input's own columns.
// ev_duplicate marks an address (trimmed, lower-cased) that appeared
// earlier in the list, in any shard: the pipeline finds the repeats of the
// whole list once, from DedupKey, and hands them over in Row.Repeat.
// ev_from_history says the mailbox verdict came from the verification
// history instead of a probe now. New columns go at the end, so the
// positions clients read keep their meaning.
var columns = []string{"ev_status", "ev_status_code", "ev_domain_type", "ev_role_account", "ev_correction", "ev_duplicate", "ev_valid", "ev_from_history"}

// Checker verifies one batch of addresses with o; results[i] is for
// addrs[i].
type Checker func(ctx context.Context, addrs []string, results []verify.Result, o verify.Options) error

// SyntaxOnly checks syntax and nothing else.
func SyntaxOnly(_ context.Context, addrs []string, results []verify.Result, _ verify.Options) error {
	for i, a := range addrs {
		results[i] = verify.CheckSyntax(a)
	}
	return nil
}

// EngineChecker verifies batches with the engine's batch mode.
func EngineChecker(e *verify.Engine) Checker {
	return func(ctx context.Context, addrs []string, results []verify.Result, o verify.Options) error {
		return e.VerifyBatch(ctx, addrs, results, o)
	}
}

// Service is the email_validation list service.
type Service struct {
	Checker Checker
	// Batch is the number of rows verified together (default 1,000).
	Batch int
	// InFlight is the number of rows a shard keeps in verification at once
	// (default 100,000): every wait of the rows in flight (greylisting
	// delays, slow hosts) overlaps, so a shard of up to InFlight rows pays
	// the greylisting delay once.
	InFlight int
	// GroupRows is the most rows a shard reads ahead and groups by domain
	// (listservice.Grouper): a domain's rows among them are verified in
	// one batch, so its mail host's sessions are planned from all of
	// them. Zero or up to Batch: batches in input order (no grouping).
	GroupRows int
	// Counters, when set, snapshots the verification engine's work
	// counters; a shard's summary gets the difference over its run (with
	// several lists in one process, their counters overlap).
	Counters func() map[string]float64
	// MX, when set, returns a domain's most preferred MX host through the
	// engine's DNS cache, for routing a list's rows by MX host at
	// preparation (listservice.MXSharder, pipeline.ShardByMX).
	MX func(ctx context.Context, domain string) (string, bool)
	// Pace, when set, says which mail host paced the engine's work and
	// why (listservice.PaceReporter). With several shards in one process
	// the engine is shared: it is the process's slowest host.
	Pace func() (listservice.Pace, bool)
}

func (s *Service) batchSize() int {
	if s.Batch > 0 {
		return s.Batch
	}
	return 1_000
}

func (s *Service) inFlight() int {
	if s.InFlight > 0 {
		return s.InFlight
	}
	return 100_000
}

// New returns the service using check for verification.
func New(check Checker) *Service { return &Service{Checker: check} }

// Columns implements listservice.Service.
func (s *Service) Columns() []string { return append([]string(nil), columns...) }

// Check implements listservice.Service; any delimited input with an email
// column works.
func (s *Service) Check(listservice.Input) error { return nil }

// NewProcessor implements listservice.Service.
func (s *Service) NewProcessor(_ context.Context, in listservice.Input) (listservice.Processor, error) {
	p := &processor{svc: s, col: in.EmailIndex, report: listservice.Reporting{},
		opts: verify.Options{SMTP: true, MaxAge: in.MaxAge, Tenant: in.HistoryTenant}}
	if s.Counters != nil {
		p.start = s.Counters()
	}
	return p, nil
}

type processor struct {
	svc    *Service
	col    int
	report listservice.Reporting
	start  map[string]float64 // engine counters when the shard began
	opts   verify.Options     // the list's: SMTP on, its maximum age, its tenant
}

// Pace implements listservice.PaceReporter.
func (p *processor) Pace() (listservice.Pace, bool) {
	if p.svc.Pace == nil {
		return listservice.Pace{}, false
	}
	return p.svc.Pace()
}

// Counters implements listservice.CounterReporter: the engine's work
// during this processor's life.
func (p *processor) Counters() map[string]float64 {
	if p.svc.Counters == nil {
		return nil
	}
	out := p.svc.Counters()
	for k, v := range out {
		out[k] = v - p.start[k]
	}
	return out
}

// Output columns.
const (
	colStatus = iota
	colCode
	colDomainType
	colRole
	colCorrection
	colDuplicate
	colValid
	colFromHistory
)

// ProcessBatch verifies a batch; the pipeline runs several at once
// (listservice.Streamer), so it touches no shared state.
func (p *processor) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	addrs := make([]string, len(rows))
	for i, r := range rows {
		addrs[i] = r.Field(p.col)
	}
	res := make([]verify.Result, len(rows))
	if err := p.svc.Checker(ctx, addrs, res, p.opts); err != nil {
		return err
	}
	for i, r := range res {
		valid := "false"
		if r.Status == verify.StatusValid || r.Status == verify.StatusSafeToSend {
			valid = "true"
		}
		role := "false"
		if r.RoleAccount {
			role = "true"
		}
		correction := suggestion(r.Corrections)
		out[i][colStatus] = string(r.Status)
		out[i][colCode] = strconv.Itoa(int(r.Code))
		out[i][colDomainType] = r.DomainType
		out[i][colRole] = role
		out[i][colCorrection] = correction
		out[i][colValid] = valid
		out[i][colFromHistory] = strconv.FormatBool(r.FromHistory)
	}
	return nil
}

// suggestion is the correction the ev_correction column offers: the first
// that a spreadsheet would not read as a formula. The engine corrects the
// domain and keeps the local part, so "=2+3@gmial.com" would be corrected
// to "=2+3@gmail.com"; the service never writes such a correction (the
// writer would escape it, but a suggested address that is a formula helps
// nobody). The verdict itself is unchanged.
func suggestion(corrections []string) string {
	for _, c := range corrections {
		if !listfile.IsFormula(c) {
			return c
		}
	}
	return ""
}

// FinishBatch marks duplicates and counts, in row order.
func (p *processor) FinishBatch(rows []listservice.Row, out [][]string) {
	statuses, codes := p.counts("status"), p.counts("status_code")
	for i, r := range rows {
		dup := "false"
		if r.Repeat {
			dup = "true"
		}
		out[i][colDuplicate] = dup
		statuses[out[i][colStatus]]++
		codes[out[i][colCode]]++
		// The rows' other flags are counted too, so that a report (and
		// the console) tells them without the result file; only when
		// present, as a reporting field without rows says nothing.
		for _, f := range []struct{ field, value string }{
			{"from_history", out[i][colFromHistory]}, {"duplicate", dup}, {"correction", strconv.FormatBool(out[i][colCorrection] != "")},
		} {
			if f.value == "true" {
				p.report.Add(f.field, "true", 1)
			}
		}
	}
}

// counts is the reporting's buckets of field, made when missing.
func (p *processor) counts(field string) map[string]int64 {
	m := p.report[field]
	if m == nil {
		m = map[string]int64{}
		p.report[field] = m
	}
	return m
}

// RowsInFlight lets the pipeline keep many batches in verification.
func (p *processor) RowsInFlight() int { return p.svc.inFlight() }

func (p *processor) Reporting() listservice.Reporting { return p.report }

// DedupKey implements listservice.Deduper: addresses repeat when they are
// equal once padding is trimmed and letters lower-cased; an empty one
// never repeats.
func (s *Service) DedupKey(addr string) string {
	return strings.ToLower(verify.TrimPadding(addr))
}

// CanResolveMX implements listservice.MXSharder: only with a resolver.
func (s *Service) CanResolveMX() bool { return s.MX != nil }

// PrimaryMX implements listservice.MXSharder.
func (s *Service) PrimaryMX(ctx context.Context, domain string) (string, bool) {
	if s.MX == nil {
		return "", false
	}
	return s.MX(ctx, domain)
}

// ShardKey implements listservice.HostSharder: the domain of DedupKey's
// normal form (after the last '@'), so that a shard holds every repeat of
// an address as well as every address of a domain, with an
// internationalised domain in its ASCII (punycode) form, the name its MX
// is looked up by; "" without one.
func (s *Service) ShardKey(addr string) string {
	key := s.DedupKey(addr)
	at := strings.LastIndexByte(key, '@')
	if at < 0 || at == len(key)-1 {
		return ""
	}
	domain := key[at+1:]
	for i := 0; i < len(domain); i++ {
		if domain[i] >= utf8.RuneSelf {
			if ascii, err := idna.Lookup.ToASCII(domain); err == nil {
				return ascii
			}
			break
		}
	}
	return domain
}

// GroupRows implements listservice.Grouper.
func (p *processor) GroupRows() int { return p.svc.GroupRows }

// GroupKey implements listservice.Grouper: the row's domain, as ShardKey
// normalises it ("" without one).
func (p *processor) GroupKey(r listservice.Row) string { return p.svc.ShardKey(r.Field(p.col)) }

// BatchSize is the rows verified together: enough to group a batch's
// addresses by domain; the SMTP stage shares sessions across batches.
func (p *processor) BatchSize() int { return p.svc.batchSize() }
func (p *processor) Close() error   { return nil }
