package people

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestImport(t *testing.T) {
	const header = "email,first,last,zip,age,interests\n"
	for _, tc := range []struct {
		name     string
		in       string
		opt      ImportOptions
		errIs    error // nil: no error expected unless errLine is set
		errLine  int   // the RowError line the returned error wraps
		res      ImportResult
		imported []string
	}{
		{
			name:     "clean",
			in:       header + "a@example.com,Ann,Lee,80203,35-44,travel;golf\nB@Example.com,Bob,Lee,,,\n",
			res:      ImportResult{Rows: 2, Imported: 2},
			imported: []string{"a@example.com", "b@example.com"},
		},
		{
			name: "stop at the first malformed row, keeping the rows before it",
			in: header + "a@example.com,Ann,Lee,80203,35-44,\n" +
				"bad-email,Bob,Lee,,,\n" +
				"c@example.com,Cy,Lee,,,\n",
			errLine:  3,
			res:      ImportResult{Rows: 2, Imported: 1, Failed: 1, Errors: []RowError{{3, ColEmail, "not an email address"}}},
			imported: []string{"a@example.com"},
		},
		{
			name: "continue, collecting errors",
			in: header + "a@example.com,Ann,Lee,80203,35-44,\n" +
				"b@example.com,Bob,Lee,1234,,\n" + // bad zip
				"c@example.com,Cy\n" + // too few fields
				"d@example.com,Di,\"Lee\nSmith\",,,\n" + // a quoted field over two lines (control char in last name)
				"e@example.com,Ed,Lee,,99,\n" + // bad age
				"f@example.com,Fay,Lee,,,skydiving\n" + // unknown interest
				"g@example.com,\"Gus\"x,Lee,,,\n" + // broken quoting
				"h@example.com,Hal,Lee,,65+,\n",
			opt: ImportOptions{ContinueOnError: true},
			res: ImportResult{Rows: 8, Imported: 2, Failed: 6, Errors: []RowError{
				{3, ColZip, "not a 5 or 9 digit zip code"},
				{4, "", "2 fields, the header has 6"},
				{5, ColLast, "contains a control character"},
				{7, ColAge, "not one of the allowed values"},
				{8, ColInterests, "unknown interest"},
				{9, "", "malformed CSV: extraneous or missing \" in quoted-field"},
			}},
			imported: []string{"a@example.com", "h@example.com"},
		},
		{
			name:     "continue, but too many errors",
			in:       header + "a@example.com,,,,,\nx,,,,,\ny,,,,,\nb@example.com,,,,,\nz,,,,,\nc@example.com,,,,,\n",
			opt:      ImportOptions{ContinueOnError: true, MaxErrors: 2, BatchSize: 1},
			errIs:    ErrTooManyErrors,
			res:      ImportResult{Rows: 5, Imported: 2, Failed: 3, Errors: []RowError{{3, ColEmail, "not an email address"}, {4, ColEmail, "not an email address"}, {6, ColEmail, "not an email address"}}},
			imported: []string{"a@example.com", "b@example.com"},
		},
		{
			name:     "semicolon delimiter, header in any order and case, BOM, CRLF",
			in:       "\ufeffLast;EMAIL;First\r\nLee;a@example.com;Ann\r\n",
			opt:      ImportOptions{Comma: ';'},
			res:      ImportResult{Rows: 1, Imported: 1},
			imported: []string{"a@example.com"},
		},
		{
			name:     "small batches",
			in:       header + "a@example.com,,,,,\nb@example.com,,,,,\nc@example.com,,,,,\n",
			opt:      ImportOptions{BatchSize: 2},
			res:      ImportResult{Rows: 3, Imported: 3},
			imported: []string{"a@example.com", "b@example.com", "c@example.com"},
		},
		{name: "empty input", in: "", errIs: errAny},
		{name: "no email column", in: "first,last\nAnn,Lee\n", errIs: errAny},
		{name: "unknown column", in: "email,phone\na@example.com,5550100\n", errIs: errAny},
		{name: "repeated column", in: "email,first,First\na@example.com,A,B\n", errIs: errAny},
		{name: "header only", in: header, res: ImportResult{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openURL(t, boltURL(t))
			res, err := Import(context.Background(), s, strings.NewReader(tc.in), tc.opt)
			switch {
			case tc.errIs == errAny:
				if err == nil {
					t.Fatalf("no error")
				}
				return
			case tc.errIs != nil:
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("err = %v, want %v", err, tc.errIs)
				}
			case tc.errLine != 0:
				var re *RowError
				if !errors.As(err, &re) || re.Line != tc.errLine {
					t.Fatalf("err = %v, want a RowError at line %d", err, tc.errLine)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if !reflect.DeepEqual(res, tc.res) {
				t.Errorf("result\n got %+v\nwant %+v", res, tc.res)
			}
			keys := []Key{}
			for _, e := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				keys = append(keys, EmailKey(e+"@example.com"))
			}
			got, err := s.LookupBatch(context.Background(), keys)
			if err != nil {
				t.Fatal(err)
			}
			var have []string
			for _, r := range got {
				if r != nil {
					have = append(have, r.Email)
				}
			}
			if !reflect.DeepEqual(have, tc.imported) {
				t.Errorf("in the store: %v, want %v", have, tc.imported)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestImportValues(t *testing.T) {
	s := openURL(t, boltURL(t))
	in := "email,first,middle,last,street,city,state,zip,household_id,age,gender,household_income,net_worth," +
		"home_market_value,home_owner_status,length_of_residence,marital_status,presence_of_children,education,occupation,interests," +
		"life_stage_segment,life_stage_group,financial_segment,financial_group,rfm_offline_avg_days,rfm_online_avg_days,rfm_avg_dollars,rfm_last_order\n" +
		" Ann@Example.com ,Ann,Q,Lee,\"12 Oak St, Apt 5\",Denver,co,80203,H1,35-44,female,75k-100k,100k-250k," +
		"300k-350k,Own,7 Years,Married,Yes,Completed College,Professional,cooking;travel," +
		"busy families,Established Families,Comfortable Savers,Comfortable,45, 21 ,57.40,2025-11-03\n"
	if _, err := Import(context.Background(), s, strings.NewReader(in), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(context.Background(), EmailKey("ann@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	want := person("ann@example.com", "Ann", "Lee", "H1")
	want.Middle, want.Street = "Q", "12 Oak St, Apt 5"
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("got  %+v\nwant %+v", *got, want)
	}
}

// TestImportGenerated round-trips the generator's CSV through Import.
func TestImportGenerated(t *testing.T) {
	recs := GenerateSlice(11, 2000)
	var buf bytes.Buffer
	if err := WriteCSV(&buf, func(yield func(Record) bool) {
		for _, r := range recs {
			if !yield(r) {
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	s := openURL(t, boltURL(t))
	res, err := Import(context.Background(), s, &buf, ImportOptions{BatchSize: 300})
	if err != nil || res.Imported != len(recs) || res.Failed != 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	keys := make([]Key, len(recs))
	for i, r := range recs {
		keys[i] = SHA1Key(EmailSHA1(r.Email))
	}
	got, err := s.LookupBatch(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if got[i] == nil || !reflect.DeepEqual(*got[i], recs[i]) {
			t.Fatalf("record %d: got %+v\nwant %+v", i, got[i], recs[i])
		}
	}
}

type failingStore struct{ Store }

func (failingStore) Upsert(context.Context, []Record) error { return io.ErrClosedPipe }

func TestImportStoreError(t *testing.T) {
	_, err := Import(context.Background(), failingStore{}, strings.NewReader("email\na@example.com\n"), ImportOptions{})
	if !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Import(ctx, openURL(t, boltURL(t)), strings.NewReader("email\na@example.com\n"), ImportOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
}
