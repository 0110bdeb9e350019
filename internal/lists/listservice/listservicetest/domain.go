// Package listservicetest holds test doubles for the list service seam.
package listservicetest

import (
	"context"
	"strings"

	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// DomainService stands in for a report-capable service in tests: it
// appends the domain of the first column's email and counts rows per
// domain in Reporting ("domain" → domain → rows).
type DomainService struct{}

// Columns implements listservice.Service.
func (DomainService) Columns() []string { return []string{"domain"} }

// Check implements listservice.Service.
func (DomainService) Check(listservice.Input) error { return nil }

// NewProcessor implements listservice.Service.
func (DomainService) NewProcessor(context.Context, listservice.Input) (listservice.Processor, error) {
	return &domainProc{rep: listservice.Reporting{}}, nil
}

type domainProc struct{ rep listservice.Reporting }

func (p *domainProc) ProcessBatch(_ context.Context, rows []listservice.Row, out [][]string) error {
	for i, r := range rows {
		email := r.Field(0)
		d := email[strings.LastIndexByte(email, '@')+1:]
		out[i][0] = d
		p.rep.Add("domain", d, 1)
	}
	return nil
}

func (p *domainProc) Reporting() listservice.Reporting { return p.rep }
func (p *domainProc) Close() error                     { return nil }
