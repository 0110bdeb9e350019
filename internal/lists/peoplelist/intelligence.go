package peoplelist

import (
	"context"
	"errors"
	"fmt"

	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// IntelligenceColumns are the columns email_intelligence appends, in order:
// every demographic field of the people store (people.DemographicColumns:
// the bucketed fields, life stage and financial segments and groups, the
// rfm fields), then interests (names joined with ';').
var IntelligenceColumns = append(people.DemographicColumns(), people.ColInterests)

// demographics returns r's values in IntelligenceColumns order.
func demographics(r *people.Record) []string {
	out := make([]string, len(IntelligenceColumns))
	for i, c := range IntelligenceColumns {
		out[i] = r.Value(c)
	}
	return out
}

// TotalCount is the reporting bucket of email_intelligence.
const TotalCount = "Total Count"

// EmailIntelligence is the email_intelligence list service.
type EmailIntelligence struct {
	// Store is the people store matched against. The service does not
	// close it.
	Store people.Store
}

// NewEmailIntelligence returns the service over store.
func NewEmailIntelligence(store people.Store) *EmailIntelligence {
	return &EmailIntelligence{Store: store}
}

// Columns implements listservice.Service.
func (s *EmailIntelligence) Columns() []string {
	return append([]string(nil), IntelligenceColumns...)
}

// Check implements listservice.Service: it needs a store and an email
// column inside the header (when there is one).
func (s *EmailIntelligence) Check(in listservice.Input) error {
	if s.Store == nil {
		return errors.New("email_intelligence is not available: no people store is configured")
	}
	if in.EmailIndex < 0 {
		return fmt.Errorf("email_intelligence needs an email column (got column %d)", in.EmailIndex+1)
	}
	if in.Header != nil && in.EmailIndex >= len(in.Header) {
		return fmt.Errorf("email_intelligence: email column %d is beyond the %d header columns", in.EmailIndex+1, len(in.Header))
	}
	return nil
}

// NewProcessor implements listservice.Service.
func (s *EmailIntelligence) NewProcessor(_ context.Context, in listservice.Input) (listservice.Processor, error) {
	if err := s.Check(in); err != nil {
		return nil, err
	}
	return &intelProcessor{
		store:  s.Store,
		email:  in.EmailIndex,
		cols:   mapColumns(in.Header, in.EmailIndex),
		report: newIntelReporting(),
	}, nil
}

func newIntelReporting() listservice.Reporting {
	r := listservice.Reporting{}
	for _, c := range IntelligenceColumns {
		r.Add(c, TotalCount, 0)
	}
	return r
}

type intelProcessor struct {
	store  people.Store
	email  int
	cols   columnMap
	report listservice.Reporting
	items  []people.Input
}

func (p *intelProcessor) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	p.items = p.items[:0]
	c := &p.cols
	for _, r := range rows {
		p.items = append(p.items, people.Input{
			Email:  r.Field(p.email),
			First:  r.Field(c.first),
			Middle: r.Field(c.middle),
			Last:   r.Field(c.last),
			Street: r.Field(c.street),
			City:   r.Field(c.city),
			State:  r.Field(c.state),
			Zip:    r.Field(c.zip),
		})
	}
	res, err := people.Match(ctx, p.store, p.items)
	if err != nil {
		return fmt.Errorf("email_intelligence: matching a batch of %d rows: %w", len(rows), err)
	}
	for i := range rows {
		clear(out[i])
		if res[i].Level != people.LevelIndividual || res[i].Record == nil {
			continue
		}
		for j, c := range IntelligenceColumns {
			v := res[i].Record.Value(c)
			out[i][j] = v
			if v != "" {
				p.report.Add(c, TotalCount, 1)
			}
		}
	}
	return nil
}

func (p *intelProcessor) Reporting() listservice.Reporting { return p.report }
func (p *intelProcessor) Close() error                     { return nil }
