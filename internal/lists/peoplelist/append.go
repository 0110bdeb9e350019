package peoplelist

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

// AppendColumns are the columns email_append appends, in order.
var AppendColumns = []string{"email", "email_match_type"}

// Values of the email_match_type column (empty when nothing matched).
const (
	MatchIndividual = "Individual"
	MatchHousehold  = "Household"
)

// Reporting field and buckets of email_append.
const (
	ReportMatchType       = "email_match_type"
	ReportIndividualMatch = "Individual match"
	ReportHouseholdMatch  = "Household match"
)

// Values of EmailAppend.MatchType (options.email_append.match_type).
const (
	MatchTypeIndividual = "I" // Individual matches only
	MatchTypeHousehold  = "H" // Individual and Household matches (the default)
)

// RequiredAppendFields are the person fields email_append needs header
// columns for.
var RequiredAppendFields = []string{FieldFirst, FieldLast, FieldZip}

// ErrNoPostalIndex is returned by EmailAppend.Check when the store
// implements neither PostalFinder nor people.NamePostalFinder.
var ErrNoPostalIndex = errors.New("email_append is not available: the configured people store has no name/postal index")

// ErrNoHeader is returned by EmailAppend.Check for an input without a
// header row.
var ErrNoHeader = errors.New("email_append needs a header row naming the first, last, street, city, state and zip columns; submit with header=true")

// EmailAppend is the email_append list service.
type EmailAppend struct {
	// Store is the people store; it must implement PostalFinder or
	// people.NamePostalFinder. The service does not close it.
	Store people.Store
	// MatchType is "I" (Individual matches only) or "H" or "" (Individual
	// and Household matches).
	MatchType string
}

// NewEmailAppend returns the service over store allowing both match types.
func NewEmailAppend(store people.Store) *EmailAppend { return &EmailAppend{Store: store} }

// Columns implements listservice.Service.
func (s *EmailAppend) Columns() []string { return append([]string(nil), AppendColumns...) }

// Check implements listservice.Service. It fails when the store has no
// name/postal index (ErrNoPostalIndex), for an unknown MatchType, without a
// header (ErrNoHeader), and when the header lacks a required column (the
// error names the missing ones and their accepted header names).
func (s *EmailAppend) Check(in listservice.Input) error {
	if _, err := s.finder(); err != nil {
		return err
	}
	switch s.MatchType {
	case "", MatchTypeIndividual, MatchTypeHousehold:
	default:
		return fmt.Errorf("email_append: match_type %q must be I or H", truncate(s.MatchType, 10))
	}
	if in.Header == nil {
		return ErrNoHeader
	}
	m := mapColumns(in.Header, -1)
	var missing, accepted []string
	for _, f := range RequiredAppendFields {
		if *m.ptr(f) < 0 {
			missing = append(missing, f)
			accepted = append(accepted, f+": "+strings.Join(HeaderAliases[f], ", "))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("email_append: the header has no %s column (required: first, last and zip; optional: street, city and state; accepted names: %s)",
			strings.Join(missing, ", "), strings.Join(accepted, "; "))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func (s *EmailAppend) finder() (PostalFinder, error) {
	if f, ok := s.Store.(PostalFinder); ok && s.Store != nil {
		return f, nil
	}
	return nil, ErrNoPostalIndex
}

// NewProcessor implements listservice.Service; it runs Check first.
//
// The input's email column is ignored: the name and postal columns are
// mapped from the whole header (so a header column named like a person
// field is used even if it is the email column).
func (s *EmailAppend) NewProcessor(_ context.Context, in listservice.Input) (listservice.Processor, error) {
	if err := s.Check(in); err != nil {
		return nil, err
	}
	f, _ := s.finder()
	r := listservice.Reporting{}
	r.Add(ReportMatchType, ReportIndividualMatch, 0)
	r.Add(ReportMatchType, ReportHouseholdMatch, 0)
	return &appendProcessor{
		finder:         f,
		cols:           mapColumns(in.Header, -1),
		individualOnly: s.MatchType == MatchTypeIndividual,
		report:         r,
	}, nil
}

type appendProcessor struct {
	finder         PostalFinder
	cols           columnMap
	individualOnly bool
	report         listservice.Reporting
	items          []people.Input
}

func (p *appendProcessor) Reporting() listservice.Reporting { return p.report }
func (p *appendProcessor) Close() error                     { return nil }

// ProcessBatch matches the batch's rows with people.MatchNamePostal: one
// FindByNamePostal call, the rules shared with GET /v5/eppend.
func (p *appendProcessor) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	c := &p.cols
	p.items = p.items[:0]
	for _, r := range rows {
		p.items = append(p.items, people.Input{
			First: r.Field(c.first), Middle: r.Field(c.middle), Last: r.Field(c.last),
			Street: r.Field(c.street), City: r.Field(c.city), State: r.Field(c.state), Zip: r.Field(c.zip),
		})
	}
	res, err := people.MatchNamePostal(ctx, p.finder, p.items)
	if err != nil {
		return fmt.Errorf("email_append: name/postal lookup of a batch of %d rows: %w", len(rows), err)
	}
	for i := range rows {
		clear(out[i])
		var kind string
		switch res[i].Level {
		case people.LevelIndividual:
			kind = MatchIndividual
			p.report.Add(ReportMatchType, ReportIndividualMatch, 1)
		case people.LevelHousehold:
			if p.individualOnly {
				continue
			}
			kind = MatchHousehold
			p.report.Add(ReportMatchType, ReportHouseholdMatch, 1)
		default:
			continue
		}
		out[i][0], out[i][1] = res[i].Record.Email, kind
	}
	return nil
}
