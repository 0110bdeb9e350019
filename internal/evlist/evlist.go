// Package evlist runs email verification over lists: the email_validation
// list service.
//
// Rows are verified in batches by a Checker (the verify.Engine's batch
// mode in production), and each row gets the result columns appended.
package evlist

import (
	"context"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/emaildata/emaildata/internal/listservice"
	"github.com/emaildata/emaildata/internal/verify"
)

// Columns appended to every row, after the input's own columns.
// ev_duplicate marks an address (trimmed, lower-cased) that appeared
// earlier in the list: earlier shards' rows are observed before a shard
// starts (PriorObserver), so repeats across shards are flagged too.
var columns = []string{"ev_status", "ev_status_code", "ev_domain_type", "ev_role_account", "ev_correction", "ev_duplicate", "ev_valid"}

// Checker verifies one batch of addresses; results[i] is for addrs[i].
type Checker func(ctx context.Context, addrs []string, results []verify.Result) error

// SyntaxOnly checks syntax and nothing else.
func SyntaxOnly(_ context.Context, addrs []string, results []verify.Result) error {
	for i, a := range addrs {
		results[i] = verify.CheckSyntax(a)
	}
	return nil
}

// EngineChecker verifies batches with the engine's batch mode.
func EngineChecker(e *verify.Engine) Checker {
	return func(ctx context.Context, addrs []string, results []verify.Result) error {
		return e.VerifyBatch(ctx, addrs, results, verify.Options{SMTP: true})
	}
}

// Service is the email_validation list service.
type Service struct {
	Checker Checker
	// Batch is the number of rows verified together (default 10,000).
	Batch int
}

func (s *Service) batchSize() int {
	if s.Batch > 0 {
		return s.Batch
	}
	return 10_000
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
	return &processor{svc: s, col: in.EmailColumn, report: listservice.Reporting{}, seen: map[uint64]struct{}{}}, nil
}

type processor struct {
	svc     *Service
	col     int
	report  listservice.Reporting
	addrs   []string
	results []verify.Result
	// seen holds 64-bit FNV-1a digests of normalised addresses: 8 bytes an
	// address, with a false "duplicate" chance of about n²/2⁶⁵.
	seen map[uint64]struct{}
}

func (p *processor) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	p.addrs = p.addrs[:0]
	for _, r := range rows {
		p.addrs = append(p.addrs, r.Field(p.col))
	}
	if cap(p.results) < len(rows) {
		p.results = make([]verify.Result, len(rows))
	}
	res := p.results[:len(rows)]
	clear(res) // results are reused: nothing may leak from the previous batch
	if err := p.svc.Checker(ctx, p.addrs, res); err != nil {
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
		correction := ""
		if len(r.Corrections) > 0 {
			correction = r.Corrections[0]
		}
		dup := "false"
		if p.remember(p.addrs[i]) {
			dup = "true"
		}
		out[i][0] = string(r.Status)
		out[i][1] = strconv.Itoa(int(r.Code))
		out[i][2] = r.DomainType
		out[i][3] = role
		out[i][4] = correction
		out[i][5] = dup
		out[i][6] = valid
		p.report.Add("status", string(r.Status), 1)
		p.report.Add("status_code", strconv.Itoa(int(r.Code)), 1)
	}
	return nil
}

func (p *processor) Reporting() listservice.Reporting { return p.report }

// remember records addr and reports whether it was seen before.
func (p *processor) remember(addr string) bool {
	norm := strings.ToLower(strings.TrimSpace(addr))
	if norm == "" {
		return false
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(norm))
	d := h.Sum64()
	if _, ok := p.seen[d]; ok {
		return true
	}
	p.seen[d] = struct{}{}
	return false
}

// ObservePrior records the addresses of rows before this shard.
func (p *processor) ObservePrior(fields []string) {
	if p.col < len(fields) {
		p.remember(fields[p.col])
	}
}

// BatchSize asks for large batches: with SMTP on, each batch pays its
// slowest domain's waits (greylisting retries, stalled hosts) once, and one
// SMTP session serves more of a domain's addresses.
func (p *processor) BatchSize() int { return p.svc.batchSize() }
func (p *processor) Close() error   { return nil }
