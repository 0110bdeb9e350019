// Package evlist runs email verification over lists: the email_validation
// list service.
//
// It currently runs the syntax stage of internal/verify only; the DNS, list
// and SMTP stages plug in through the same Checker when they land.
package evlist

import (
	"context"
	"strconv"

	"github.com/emaildata/emaildata/internal/listservice"
	"github.com/emaildata/emaildata/internal/verify"
)

// Columns appended to every row, after the input's own columns.
var columns = []string{"ev_status", "ev_status_code", "ev_domain_type", "ev_role_account", "ev_valid_email"}

// Checker verifies one batch of addresses; results[i] is for addrs[i].
type Checker func(ctx context.Context, addrs []string, results []verify.Result) error

// SyntaxOnly checks syntax and nothing else.
func SyntaxOnly(_ context.Context, addrs []string, results []verify.Result) error {
	for i, a := range addrs {
		results[i] = verify.CheckSyntax(a)
	}
	return nil
}

// Service is the email_validation list service.
type Service struct {
	Checker Checker
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
	return &processor{svc: s, col: in.EmailColumn, report: listservice.Reporting{}}, nil
}

type processor struct {
	svc     *Service
	col     int
	report  listservice.Reporting
	addrs   []string
	results []verify.Result
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
		valid := ""
		if r.Status == verify.StatusValid || r.Status == verify.StatusSafeToSend {
			valid = r.Address
		}
		role := ""
		if r.RoleAccount {
			role = "true"
		}
		out[i][0] = string(r.Status)
		out[i][1] = strconv.Itoa(int(r.Code))
		out[i][2] = r.DomainType
		out[i][3] = role
		out[i][4] = valid
		p.report.Add("status", string(r.Status), 1)
		p.report.Add("status_code", strconv.Itoa(int(r.Code)), 1)
	}
	return nil
}

func (p *processor) Reporting() listservice.Reporting { return p.report }
func (p *processor) Close() error                     { return nil }
