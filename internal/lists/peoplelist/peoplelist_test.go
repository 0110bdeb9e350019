package peoplelist

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/refdata/people"
)

const (
	seed    = 42
	nPeople = 2000
)

var (
	genOnce sync.Once
	genRecs []people.Record
)

// generated returns people.GenerateSlice(seed, nPeople), normalised.
func generated() []people.Record {
	genOnce.Do(func() {
		genRecs = people.GenerateSlice(seed, nPeople)
		for i := range genRecs {
			genRecs[i].Normalize()
		}
	})
	return genRecs
}

// openStore opens a bolt store in a temp dir loaded with recs.
func openStore(t *testing.T, recs []people.Record) people.Store {
	t.Helper()
	ctx := context.Background()
	s, err := people.Open(ctx, "bolt://"+filepath.Join(t.TempDir(), "people.db")+"?nosync=true")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Upsert(ctx, recs); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
	return s
}

// run feeds rows through p in batches of batch and returns the outputs.
func run(t *testing.T, p listservice.Processor, width int, rows [][]string, batch int) [][]string {
	t.Helper()
	out := make([][]string, len(rows))
	for lo := 0; lo < len(rows); lo += batch {
		hi := min(lo+batch, len(rows))
		in := make([]listservice.Row, 0, hi-lo)
		o := make([][]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			in = append(in, listservice.Row{Number: int64(i), Fields: rows[i]})
			cells := make([]string, width)
			for j := range cells {
				cells[j] = "stale" // must be overwritten
			}
			o = append(o, cells)
		}
		if err := p.ProcessBatch(context.Background(), in, o); err != nil {
			t.Fatalf("ProcessBatch: %v", err)
		}
		copy(out[lo:], o)
	}
	return out
}

func empty(n int) []string { return make([]string, n) }

// ---- email_intelligence ----

func TestIntelligenceColumns(t *testing.T) {
	s := NewEmailIntelligence(nil)
	want := []string{"age", "gender", "household_income", "net_worth", "home_market_value", "home_owner_status",
		"length_of_residence", "marital_status", "presence_of_children", "education", "occupation",
		"life_stage_segment", "life_stage_group", "financial_segment", "financial_group",
		"rfm_offline_avg_days", "rfm_online_avg_days", "rfm_avg_dollars", "rfm_last_order", "interests"}
	if got := s.Columns(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Columns = %v, want %v", got, want)
	}
	for _, c := range want {
		if !slices.Contains(people.Columns(), c) {
			t.Errorf("column %q is not a people column", c)
		}
	}
}

func TestIntelligenceCheck(t *testing.T) {
	store := openStore(t, nil)
	tests := []struct {
		name    string
		svc     *EmailIntelligence
		in      listservice.Input
		wantErr string
	}{
		{"no header", NewEmailIntelligence(store), listservice.Input{EmailIndex: 0}, ""},
		{"header", NewEmailIntelligence(store), listservice.Input{Header: []string{"first", "email"}, EmailIndex: 1}, ""},
		{"no store", NewEmailIntelligence(nil), listservice.Input{}, "email_intelligence is not available"},
		{"negative column", NewEmailIntelligence(store), listservice.Input{EmailIndex: -1}, "needs an email column"},
		{"column beyond header", NewEmailIntelligence(store), listservice.Input{Header: []string{"email"}, EmailIndex: 3}, "beyond the 1 header columns"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.svc.Check(tc.in)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.wantErr)
			}
			if _, err := tc.svc.NewProcessor(context.Background(), tc.in); err == nil {
				t.Fatal("NewProcessor accepted what Check rejects")
			}
		})
	}
}

// wantReport counts the non-empty demographics of recs.
func wantIntelReport(recs []*people.Record) listservice.Reporting {
	r := listservice.Reporting{}
	for _, c := range IntelligenceColumns {
		r.Add(c, TotalCount, 0)
	}
	for _, rec := range recs {
		for j, v := range demographics(rec) {
			if v != "" {
				r.Add(IntelligenceColumns[j], TotalCount, 1)
			}
		}
	}
	return r
}

func TestIntelligenceGenerated(t *testing.T) {
	recs := generated()
	store := openStore(t, recs)
	svc := NewEmailIntelligence(store)
	width := len(svc.Columns())

	type rowCase struct {
		row  []string
		want *people.Record // nil: no match
	}
	tests := []struct {
		name   string
		header []string
		email  int
		rows   func() []rowCase
	}{
		{
			name: "email only, no header", header: nil, email: 0,
			rows: func() []rowCase {
				var rc []rowCase
				for i := range recs {
					rc = append(rc, rowCase{[]string{recs[i].Email}, &recs[i]})
				}
				return rc
			},
		},
		{
			name: "email with name and postal variants", email: 2,
			header: []string{"First Name", "LAST_NAME", "Email", "Address", "city", "ST", "postal_code"},
			rows: func() []rowCase {
				var rc []rowCase
				for i := range recs {
					r := &recs[i]
					rc = append(rc, rowCase{[]string{strings.ToUpper(r.First), r.Last, " " + strings.ToUpper(r.Email) + " ", r.Street, r.City, strings.ToLower(r.State), r.Zip}, r})
				}
				return rc
			},
		},
		{
			name: "no match", header: []string{"email", "first", "last"}, email: 0,
			rows: func() []rowCase {
				a, b := housemates(t, recs)
				return []rowCase{
					// The email's owner's housemate: a Household match
					// for people.Match, which appends nothing.
					{[]string{a.Email, b.First, b.Last}, nil},
					{[]string{"nobody@example.invalid", ""}, nil},
					{[]string{"", ""}, nil},
					{[]string{"not an email", ""}, nil},
					{[]string{}, nil}, // short row
					// A first name conflicting with the owner's: not an Individual match.
					{[]string{recs[0].Email, "Zzyzx", ""}, nil},
					// A digest in the email column matches like the address.
					{[]string{people.EmailMD5(recs[1].Email), ""}, &recs[1]},
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := listservice.Input{Header: tc.header, EmailIndex: tc.email}
			if err := svc.Check(in); err != nil {
				t.Fatalf("Check: %v", err)
			}
			p, err := svc.NewProcessor(context.Background(), in)
			if err != nil {
				t.Fatalf("NewProcessor: %v", err)
			}
			defer p.Close()
			cases := tc.rows()
			rows := make([][]string, len(cases))
			var matched []*people.Record
			for i, c := range cases {
				rows[i] = c.row
				if c.want != nil {
					matched = append(matched, c.want)
				}
			}
			out := run(t, p, width, rows, 512)
			for i, c := range cases {
				want := empty(width)
				if c.want != nil {
					want = demographics(c.want)
				}
				if !reflect.DeepEqual(out[i], want) {
					t.Fatalf("row %d: got %q, want %q", i, out[i], want)
				}
			}
			if got, want := p.Reporting(), wantIntelReport(matched); !reflect.DeepEqual(got, want) {
				t.Fatalf("Reporting = %v, want %v", got, want)
			}
		})
	}
}

// housemates returns two people of a household with different first names.
func housemates(t *testing.T, recs []people.Record) (*people.Record, *people.Record) {
	for i := 1; i < len(recs); i++ {
		a, b := &recs[i-1], &recs[i]
		if a.HouseholdID == b.HouseholdID && !strings.EqualFold(a.First, b.First) && a.First[0] != b.First[0] {
			return a, b
		}
	}
	t.Fatal("no housemates in the generated people")
	return nil, nil
}

func TestIntelligenceReportingShape(t *testing.T) {
	r := people.Record{Email: "pat@example.com", First: "Pat", Last: "Doe", Age: "25-34", Gender: "Female", Occupation: "Sales",
		RFMLastOrder: "2025-01-31", Interests: 1}
	store := openStore(t, []people.Record{r})
	p, err := NewEmailIntelligence(store).NewProcessor(context.Background(), listservice.Input{EmailIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	run(t, p, len(IntelligenceColumns), [][]string{{"pat@example.com"}, {"pat@example.com"}, {"x@example.com"}}, 2)
	want := listservice.Reporting{
		"age": {"Total Count": 2}, "gender": {"Total Count": 2}, "occupation": {"Total Count": 2},
		"household_income": {"Total Count": 0}, "net_worth": {"Total Count": 0}, "home_market_value": {"Total Count": 0},
		"home_owner_status": {"Total Count": 0}, "length_of_residence": {"Total Count": 0}, "marital_status": {"Total Count": 0},
		"presence_of_children": {"Total Count": 0}, "education": {"Total Count": 0},
		"life_stage_segment": {"Total Count": 0}, "life_stage_group": {"Total Count": 0},
		"financial_segment": {"Total Count": 0}, "financial_group": {"Total Count": 0},
		"rfm_offline_avg_days": {"Total Count": 0}, "rfm_online_avg_days": {"Total Count": 0},
		"rfm_avg_dollars": {"Total Count": 0}, "rfm_last_order": {"Total Count": 2}, "interests": {"Total Count": 2},
	}
	if got := p.Reporting(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Reporting = %v, want %v", got, want)
	}
}

// ---- email_append ----

var appendHeader = []string{"first", "last", "street", "city", "state", "zip", "email"}

func appendRow(first string, r *people.Record) []string {
	return []string{first, r.Last, r.Street, r.City, r.State, r.Zip, ""}
}

func withIndex(t *testing.T, recs []people.Record) people.Store {
	return WithPostalIndex(openStore(t, recs), NewPostalIndex(slices.Values(recs)))
}

// plainStore hides the store's own name/postal index: only the
// people.Store methods remain.
type plainStore struct{ people.Store }

func TestAppendCheck(t *testing.T) {
	plain := plainStore{openStore(t, nil)}
	indexed := WithPostalIndex(plain, NewPostalIndex(slices.Values([]people.Record(nil))))
	tests := []struct {
		name      string
		svc       *EmailAppend
		header    []string
		wantErr   string
		wantIs    error
		wantNames []string // must appear in the error
	}{
		{name: "ok", svc: NewEmailAppend(indexed), header: appendHeader},
		{name: "ok variants", svc: NewEmailAppend(indexed), header: []string{"First Name", "Surname", "Zip Code"}},
		{name: "ok match type I", svc: &EmailAppend{Store: indexed, MatchType: "I"}, header: appendHeader},
		{name: "ok store's own index", svc: NewEmailAppend(openStore(t, nil)), header: appendHeader},
		{name: "store without index", svc: NewEmailAppend(plain), header: appendHeader, wantIs: ErrNoPostalIndex,
			wantErr: "email_append is not available: the configured people store has no name/postal index"},
		{name: "nil store", svc: NewEmailAppend(nil), header: appendHeader, wantIs: ErrNoPostalIndex},
		{name: "no header", svc: NewEmailAppend(indexed), header: nil, wantIs: ErrNoHeader,
			wantErr: "email_append needs a header row naming the first, last, street, city, state and zip columns; submit with header=true"},
		{name: "missing zip", svc: NewEmailAppend(indexed), header: []string{"first", "last", "street", "city", "state"},
			wantNames: []string{"has no zip column", "postal_code"}},
		{name: "missing first and last", svc: NewEmailAppend(indexed), header: []string{"name", "zip"},
			wantNames: []string{"has no first, last column", "first_name", "last_name"}},
		{name: "bad match type", svc: &EmailAppend{Store: indexed, MatchType: "X"}, header: appendHeader,
			wantNames: []string{`match_type "X" must be I or H`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := listservice.Input{Header: tc.header, EmailIndex: len(tc.header) - 1}
			err := tc.svc.Check(in)
			if tc.wantErr == "" && tc.wantIs == nil && tc.wantNames == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check accepted the input")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Check = %v, want %v", err, tc.wantIs)
			}
			if tc.wantErr != "" && err.Error() != tc.wantErr {
				t.Errorf("Check = %q, want %q", err, tc.wantErr)
			}
			for _, n := range tc.wantNames {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("Check = %q, want it to contain %q", err, n)
				}
			}
			if _, err := tc.svc.NewProcessor(context.Background(), in); err == nil {
				t.Error("NewProcessor accepted what Check rejects")
			}
		})
	}
}

// expectAppend is the oracle for rows built from generated people with
// their full address: an Individual match unless a housemate with the same
// last name also has the same first name; a Household match (the first
// such person in generation order) when the first name is nobody's.
func expectAppend(recs []people.Record, first string, p *people.Record) (string, string) {
	var same []*people.Record // same last, zip, street (hence household, in generated data)
	for i := range recs {
		r := &recs[i]
		if strings.EqualFold(r.Last, p.Last) && r.Zip == p.Zip && strings.EqualFold(r.Street, p.Street) {
			same = append(same, r)
		}
	}
	var named []*people.Record
	for _, r := range same {
		if strings.EqualFold(r.First, first) {
			named = append(named, r)
		}
	}
	if len(named) == 1 {
		return named[0].Email, MatchIndividual
	}
	hh := same[0].HouseholdID
	for _, r := range same {
		if r.HouseholdID != hh {
			return "", ""
		}
	}
	return same[0].Email, MatchHousehold
}

func TestAppendGenerated(t *testing.T) {
	recs := generated()
	store := withIndex(t, recs)
	width := len(AppendColumns)

	type rowCase struct {
		row         []string
		email, kind string
	}
	var individual, household, none []rowCase
	for i := range recs {
		p := &recs[i]
		e, k := expectAppend(recs, p.First, p)
		individual = append(individual, rowCase{appendRow(p.First, p), e, k})
		e, k = expectAppend(recs, "Zzyzx", p)
		household = append(household, rowCase{appendRow("Zzyzx", p), e, k})
	}
	p0 := &recs[0]
	noStreet := appendRow("Zzyzx", p0)
	noStreet[2] = ""
	otherStreet := appendRow(p0.First, p0)
	otherStreet[2] = "1 Nowhere Rd"
	otherZip := appendRow(p0.First, p0)
	otherZip[5] = "00001"
	otherCity := appendRow(p0.First, p0)
	otherCity[3] = "Atlantis"
	none = []rowCase{
		{noStreet, "", ""},    // household needs the street
		{otherStreet, "", ""}, // conflicting street
		{otherZip, "", ""},    // wrong zip
		{otherCity, "", ""},   // conflicting city
		{[]string{p0.First, "Zzyzx", p0.Street, "", "", p0.Zip, ""}, "", ""}, // unknown last name
		{[]string{p0.First, p0.Last, "", "", "", "", ""}, "", ""},            // no zip
		{[]string{}, "", ""}, // short row
	}
	// Without street, city and state the first name still finds a person
	// (when unambiguous in the zip).
	loose := []rowCase{}
	for i := range recs[:200] {
		p := &recs[i]
		n := 0
		for j := range recs {
			if strings.EqualFold(recs[j].First, p.First) && strings.EqualFold(recs[j].Last, p.Last) && recs[j].Zip == p.Zip {
				n++
			}
		}
		if n == 1 {
			loose = append(loose, rowCase{[]string{p.First, p.Last, "", "", "", p.Zip, ""}, p.Email, MatchIndividual})
		}
	}

	count := func(rc []rowCase, kind string) int64 {
		n := int64(0)
		for _, c := range rc {
			if c.kind == kind {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name      string
		matchType string
		rows      []rowCase
		minIndiv  int64 // sanity: the oracle is not trivially empty
		minHH     int64
	}{
		{"individual", "", individual, nPeople * 9 / 10, 0},
		{"household", "H", household, 0, nPeople * 9 / 10},
		{"household dropped with I", "I", household, 0, 0},
		{"individual with I", "I", individual, nPeople * 9 / 10, 0},
		{"no match", "", none, 0, 0},
		{"name and zip only", "", loose, 150, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &EmailAppend{Store: store, MatchType: tc.matchType}
			in := listservice.Input{Header: appendHeader, EmailIndex: 6}
			p, err := svc.NewProcessor(context.Background(), in)
			if err != nil {
				t.Fatalf("NewProcessor: %v", err)
			}
			defer p.Close()
			rows := make([][]string, len(tc.rows))
			for i, c := range tc.rows {
				rows[i] = c.row
			}
			out := run(t, p, width, rows, 512)
			var nI, nH int64
			for i, c := range tc.rows {
				want := []string{c.email, c.kind}
				if c.kind == MatchHousehold && tc.matchType == "I" {
					want = []string{"", ""}
				}
				if !reflect.DeepEqual(out[i], want) {
					t.Fatalf("row %d: got %q, want %q", i, out[i], want)
				}
				switch want[1] {
				case MatchIndividual:
					nI++
				case MatchHousehold:
					nH++
				}
			}
			if nI < tc.minIndiv || nH < tc.minHH {
				t.Fatalf("only %d Individual and %d Household matches", nI, nH)
			}
			if tc.matchType != "I" && (nI != count(tc.rows, MatchIndividual) || nH != count(tc.rows, MatchHousehold)) {
				t.Fatal("oracle counts disagree")
			}
			want := listservice.Reporting{"email_match_type": {"Individual match": nI, "Household match": nH}}
			if got := p.Reporting(); !reflect.DeepEqual(got, want) {
				t.Fatalf("Reporting = %v, want %v", got, want)
			}
		})
	}
}

// TestAppendRules covers ambiguity and normalisation on hand-made people.
func TestAppendRules(t *testing.T) {
	rec := func(email, first, last, street, zip, hh string) people.Record {
		return people.Record{Email: email, First: first, Last: last, Street: street, City: "Denver", State: "CO", Zip: zip, HouseholdID: hh}
	}
	recs := []people.Record{
		rec("john1@example.com", "John", "Smith", "12 Oak Street", "80203", "H1"),
		rec("mary1@example.com", "Mary", "Smith", "12 Oak Street", "80203", "H1"),
		rec("john2@example.com", "John", "Smith", "400 Elm Avenue Apt 3", "80203", "H2"),
		rec("mj@example.com", "Mary-Jo", "O'Neil", "7 Pine Rd", "02138", "H3"),
		rec("jr@example.com", "Sam", "Lee", "9 Ash Ct", "80203", "H4"),
		rec("sr@example.com", "Sam", "Lee", "9 Ash Ct", "80203", "H4"),
		rec("solo@example.com", "Kim", "Solo", "1 Main St", "80203", ""),
	}
	header := []string{"FirstName", "Last Name", "street_address", "zip_code"}
	for _, st := range []struct {
		name  string
		store people.Store
	}{
		{"PostalIndex", withIndex(t, recs)},
		{"store index", openStore(t, recs)}, // the bolt store's own name/postal index
	} {
		t.Run(st.name, func(t *testing.T) { testAppendRules(t, st.store, header) })
	}
}

func testAppendRules(t *testing.T, store people.Store, header []string) {
	tests := []struct {
		name                string
		row                 []string
		matchType           string
		wantEmail, wantKind string
	}{
		{"ambiguous name in zip", []string{"John", "Smith", "", "80203"}, "", "", ""},
		{"street disambiguates", []string{"john", "SMITH", "400 Elm Ave #3", "80203-1234"}, "", "john2@example.com", MatchIndividual},
		{"household member", []string{"Jane", "Smith", "12 oak st", "80203"}, "", "john1@example.com", MatchHousehold},
		{"household member with I", []string{"Jane", "Smith", "12 oak st", "80203"}, "I", "", ""},
		{"household with no first name", []string{"", "Smith", "400 Elm Ave", "80203"}, "", "john2@example.com", MatchHousehold},
		{"punctuation and lost zero", []string{"maryjo", "ONeil", "", "2138"}, "", "mj@example.com", MatchIndividual},
		{"same name twice in a household", []string{"Sam", "Lee", "9 Ash Court", "80203"}, "", "jr@example.com", MatchHousehold},
		{"same name twice, no street", []string{"Sam", "Lee", "", "80203"}, "", "", ""},
		{"no household id", []string{"Lou", "Solo", "1 Main Street", "80203"}, "", "solo@example.com", MatchHousehold},
		{"bad zip", []string{"Kim", "Solo", "", "8020x"}, "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := (&EmailAppend{Store: store, MatchType: tc.matchType}).NewProcessor(context.Background(), listservice.Input{Header: header})
			if err != nil {
				t.Fatal(err)
			}
			out := run(t, p, 2, [][]string{tc.row}, 1)
			if want := []string{tc.wantEmail, tc.wantKind}; !reflect.DeepEqual(out[0], want) {
				t.Fatalf("got %q, want %q", out[0], want)
			}
		})
	}
}

func TestAppendReportingShape(t *testing.T) {
	p, err := NewEmailAppend(withIndex(t, nil)).NewProcessor(context.Background(), listservice.Input{Header: appendHeader})
	if err != nil {
		t.Fatal(err)
	}
	want := listservice.Reporting{"email_match_type": {"Individual match": 0, "Household match": 0}}
	if got := p.Reporting(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Reporting = %v, want %v", got, want)
	}
}

// countingFinder counts lookups: one per batch.
type countingFinder struct {
	PostalFinder
	calls, keys int
}

func (f *countingFinder) FindByNamePostal(ctx context.Context, keys []PostalKey) ([][]people.Record, error) {
	f.calls++
	f.keys += len(keys)
	return f.PostalFinder.FindByNamePostal(ctx, keys)
}

func TestAppendOneLookupPerBatch(t *testing.T) {
	recs := generated()[:600]
	f := &countingFinder{PostalFinder: NewPostalIndex(slices.Values(recs))}
	store := WithPostalIndex(openStore(t, nil), f)
	p, err := NewEmailAppend(store).NewProcessor(context.Background(), listservice.Input{Header: appendHeader})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]string, 0, 2*len(recs))
	for i := range recs {
		rows = append(rows, appendRow(recs[i].First, &recs[i]), appendRow(recs[i].First, &recs[i]))
	}
	run(t, p, 2, rows, 512)
	if want := (len(rows) + 511) / 512; f.calls != want {
		t.Fatalf("%d lookups, want %d (one per batch)", f.calls, want)
	}
	if f.keys >= len(rows) {
		t.Fatalf("%d keys looked up for %d rows: repeated keys are not shared within a batch", f.keys, len(rows))
	}
}

func TestAppendLookupError(t *testing.T) {
	boom := errors.New("boom")
	store := WithPostalIndex(openStore(t, nil), failingFinder{boom})
	p, err := NewEmailAppend(store).NewProcessor(context.Background(), listservice.Input{Header: appendHeader})
	if err != nil {
		t.Fatal(err)
	}
	out := [][]string{empty(2)}
	err = p.ProcessBatch(context.Background(), []listservice.Row{{Fields: []string{"A", "B", "", "", "", "80203"}}}, out)
	if !errors.Is(err, boom) {
		t.Fatalf("ProcessBatch = %v, want %v", err, boom)
	}
	if strings.Contains(err.Error(), "80203") {
		t.Fatalf("error %q carries row data", err)
	}
}

type failingFinder struct{ err error }

func (f failingFinder) FindByNamePostal(context.Context, []PostalKey) ([][]people.Record, error) {
	return nil, f.err
}

func TestPostalIndex(t *testing.T) {
	recs := []people.Record{
		{Email: "a@example.com", First: "Ann", Last: "O'Neil", Zip: "02138", HouseholdID: "H1", Age: "25-34"},
		{Email: "b@example.com", First: "Bo", Last: "Oneil", Zip: "02138-0001", HouseholdID: "H1"},
		{Email: "c@example.com", First: "Cy", Last: "Lee", Zip: "80203"},
		{Email: "A@Example.com", First: "Ann", Last: "Park", Zip: "80203"}, // replaces a@
		{Email: "d@example.com", First: "Di", Last: "", Zip: "80203"},      // no last name: skipped
	}
	ix := NewPostalIndex(slices.Values(recs))
	if ix.Len() != 3 {
		t.Fatalf("Len = %d, want 3", ix.Len())
	}
	got, err := ix.FindByNamePostal(context.Background(), []PostalKey{
		{Last: "ONEIL", Zip: "2138"}, {Last: "park", Zip: "80203"}, {Last: "lee", Zip: "99999"}, {Last: "", Zip: "80203"}, {Last: "lee", Zip: "bad"},
	})
	if err != nil {
		t.Fatal(err)
	}
	emails := func(rs []people.Record) []string {
		var e []string
		for _, r := range rs {
			e = append(e, r.Email)
			if r.Age != "" {
				t.Errorf("index keeps demographics")
			}
		}
		return e
	}
	want := [][]string{{"b@example.com"}, {"a@example.com"}, nil, nil, nil}
	// Without a valid zip, by last name, city and state.
	loc := []people.Record{
		{Email: "e@example.com", First: "Ed", Last: "Ray", City: "Fort Collins", State: "CO", Zip: "80521"},
		{Email: "f@example.com", First: "Fay", Last: "Ray", City: "Fort Collins", State: "co"},
	}
	lix := NewPostalIndex(slices.Values(loc))
	lgot, err := lix.FindByNamePostal(context.Background(), []PostalKey{
		{Last: "RAY", City: "fortcollins", State: "CO"}, {Last: "ray", Zip: "80521"}, {Last: "ray", City: "Fort Collins"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := [][]string{emails(lgot[0]), emails(lgot[1]), emails(lgot[2])}; !reflect.DeepEqual(g, [][]string{{"e@example.com", "f@example.com"}, {"e@example.com"}, nil}) {
		t.Errorf("locality keys: %v", g)
	}
	for i := range want {
		if g := emails(got[i]); !reflect.DeepEqual(g, want[i]) {
			t.Errorf("key %d: got %v, want %v", i, g, want[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ix.FindByNamePostal(ctx, []PostalKey{{Last: "lee", Zip: "80203"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled lookup: %v", err)
	}
}

func TestServicesImplementSeam(t *testing.T) {
	var _ listservice.Service = (*EmailIntelligence)(nil)
	var _ listservice.Service = (*EmailAppend)(nil)
	var _ PostalFinder = (*PostalIndex)(nil)
	reg := listservice.NewRegistry()
	reg.Register(NameEmailIntelligence, NewEmailIntelligence(nil))
	reg.Register(NameEmailAppend, NewEmailAppend(nil))
	for _, n := range []string{"email_intelligence", "email_append"} {
		if _, err := reg.Lookup(n); err != nil {
			t.Error(err)
		}
	}
	if got := NewEmailAppend(nil).Columns(); !reflect.DeepEqual(got, []string{"email", "email_match_type"}) {
		t.Fatalf("append Columns = %v", got)
	}
}

// TestAppendStoreIndex runs email_append over a bolt store without
// WithPostalIndex: the store's own name/postal index finds the same
// Individual matches as the in-memory one.
func TestAppendStoreIndex(t *testing.T) {
	recs := generated()
	store := openStore(t, recs)
	if _, ok := store.(people.NamePostalFinder); !ok {
		t.Fatal("the bolt store does not implement people.NamePostalFinder")
	}
	var rows [][]string
	var want [][]string
	for i := range recs {
		p := &recs[i]
		if e, k := expectAppend(recs, p.First, p); k == MatchIndividual {
			rows = append(rows, appendRow(p.First, p))
			want = append(want, []string{e, k})
		}
	}
	if len(rows) < nPeople*9/10 {
		t.Fatalf("only %d Individual rows", len(rows))
	}
	p, err := NewEmailAppend(store).NewProcessor(context.Background(), listservice.Input{Header: appendHeader, EmailIndex: 6})
	if err != nil {
		t.Fatalf("NewProcessor: %v", err)
	}
	defer p.Close()
	out := run(t, p, len(AppendColumns), rows, 512)
	for i := range rows {
		if !reflect.DeepEqual(out[i], want[i]) {
			t.Fatalf("row %d: got %q, want %q", i, out[i], want[i])
		}
	}
	wantRep := listservice.Reporting{"email_match_type": {"Individual match": int64(len(rows)), "Household match": 0}}
	if got := p.Reporting(); !reflect.DeepEqual(got, wantRep) {
		t.Fatalf("Reporting = %v, want %v", got, wantRep)
	}
}
