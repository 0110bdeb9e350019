package peoplelist

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/emaildata/emaildata/internal/listservice"
	"github.com/emaildata/emaildata/internal/people"
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
	if s.Store == nil {
		return nil, ErrNoPostalIndex
	}
	if f, ok := s.Store.(PostalFinder); ok {
		return f, nil
	}
	if f, ok := s.Store.(people.NamePostalFinder); ok {
		return storeFinder{f}, nil
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
	keys           []PostalKey
	keyOf          []int // row -> index in keys, -1 for none
}

// query is one row's name and address, normalised.
type query struct {
	first, last, street, city, state, zip string
}

func (p *appendProcessor) Reporting() listservice.Reporting { return p.report }
func (p *appendProcessor) Close() error                     { return nil }

func (p *appendProcessor) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	c := &p.cols
	qs := make([]query, len(rows))
	p.keys = p.keys[:0]
	p.keyOf = p.keyOf[:0]
	index := map[postalKey]int{}
	for i, r := range rows {
		q := query{
			first:  normName(r.Field(c.first)),
			last:   normName(r.Field(c.last)),
			street: normStreet(r.Field(c.street)),
			city:   normName(r.Field(c.city)),
			state:  strings.ToUpper(strings.TrimSpace(r.Field(c.state))),
			zip:    zip5(r.Field(c.zip)),
		}
		qs[i] = q
		k := postalKey{q.last, q.zip}
		if k.last == "" || k.zip == "" {
			p.keyOf = append(p.keyOf, -1)
			continue
		}
		j, ok := index[k]
		if !ok {
			j = len(p.keys)
			index[k] = j
			p.keys = append(p.keys, PostalKey{Last: q.last, Zip: q.zip})
		}
		p.keyOf = append(p.keyOf, j)
	}
	var found [][]people.Record
	if len(p.keys) > 0 {
		var err error
		found, err = p.finder.FindByNamePostal(ctx, p.keys)
		if err != nil {
			return fmt.Errorf("email_append: name/postal lookup of a batch of %d rows: %w", len(rows), err)
		}
		if len(found) != len(p.keys) {
			return fmt.Errorf("email_append: name/postal lookup returned %d results for %d keys", len(found), len(p.keys))
		}
	}
	for i := range rows {
		clear(out[i])
		if p.keyOf[i] < 0 {
			continue
		}
		email, kind := decide(&qs[i], found[p.keyOf[i]])
		if kind == MatchHousehold && p.individualOnly {
			continue
		}
		switch kind {
		case MatchIndividual:
			p.report.Add(ReportMatchType, ReportIndividualMatch, 1)
		case MatchHousehold:
			p.report.Add(ReportMatchType, ReportHouseholdMatch, 1)
		default:
			continue
		}
		out[i][0], out[i][1] = email, kind
	}
	return nil
}

// decide applies the email_append rules (see the package documentation) to
// one row and the candidates sharing its last name and zip. It returns the
// email and match type, or "", "".
func decide(q *query, cands []people.Record) (email, kind string) {
	// Candidates consistent with the row's address (and really sharing
	// its last name and zip, whatever the finder's normalisation).
	var ok []*people.Record
	for i := range cands {
		r := &cands[i]
		if normName(r.Last) != q.last || zip5(r.Zip) != q.zip {
			continue
		}
		if q.street != "" && r.Street != "" && normStreet(r.Street) != q.street ||
			q.city != "" && r.City != "" && normName(r.City) != q.city ||
			q.state != "" && r.State != "" && !strings.EqualFold(r.State, q.state) {
			continue
		}
		ok = append(ok, r)
	}
	var named []*people.Record
	if q.first != "" {
		for _, r := range ok {
			if normName(r.First) == q.first {
				named = append(named, r)
			}
		}
	}
	if len(named) == 1 {
		return named[0].Email, MatchIndividual
	}
	// Household: the street must agree, and one household only. This
	// also covers several people with the row's first name in one
	// household.
	if q.street == "" {
		return "", ""
	}
	var primary *people.Record
	group := ""
	for _, r := range ok {
		if r.Street == "" || normStreet(r.Street) != q.street {
			continue
		}
		g := r.HouseholdID
		if g == "" {
			g = "\x00" + r.Email
		}
		switch {
		case primary == nil:
			primary, group = r, g
		case g != group:
			return "", "" // ambiguous: more than one household
		}
	}
	if primary == nil {
		return "", ""
	}
	return primary.Email, MatchHousehold
}
