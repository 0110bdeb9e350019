package people

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestStoreAltEmails: a person's other addresses find the person by every
// key kind, in both backends, through updates, conflicts and deletes.
func TestStoreAltEmails(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Run("Lookups", func(t *testing.T) { testAltLookups(t, b.openStore(t)) })
			t.Run("Updates", func(t *testing.T) { testAltUpdates(t, b.openStore(t)) })
			t.Run("Invalid", func(t *testing.T) { testAltInvalid(t, b.openStore(t)) })
			t.Run("Large", func(t *testing.T) { testAltLarge(t, b.openStore(t)) })
			t.Run("Reopen", func(t *testing.T) { testAltReopen(t, b.url(t)) })
		})
	}
}

func withAlts(r Record, alts ...string) Record {
	r.AltEmails = alts
	return r
}

// owners looks each address up by email, MD5 and SHA-1 and returns the
// email of the person each finds ("" for none); the three must agree.
func owners(t *testing.T, s Store, addrs ...string) []string {
	t.Helper()
	var keys []Key
	for _, a := range addrs {
		keys = append(keys, EmailKey(a), MD5Key(EmailMD5(a)), SHA1Key(EmailSHA1(a)))
	}
	got, err := s.LookupBatch(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(addrs))
	for i := range addrs {
		var seen []string
		for _, r := range got[3*i : 3*i+3] {
			e := ""
			if r != nil {
				e = r.Email
			}
			seen = append(seen, e)
		}
		if seen[0] != seen[1] || seen[0] != seen[2] {
			t.Fatalf("%s: email, md5 and sha1 find %q", addrs[i], seen)
		}
		out[i] = seen[0]
	}
	return out
}

func testAltLookups(t *testing.T, s Store) {
	ctx := context.Background()
	a := withAlts(person("a@example.com", "Ann", "Lee", "H1"), " Ann.Lee@Work.TEST ", "ann@alumni.test", "a@example.com", "ann@alumni.test", "")
	b := withAlts(person("b@example.com", "Bob", "Lee", "H1"), "bob@work.test")
	c := withAlts(person("c@example.com", "Cy", "Ray", "H2"), "b@example.com") // another person's email
	if err := s.Upsert(ctx, []Record{a, b, c}); err != nil {
		t.Fatal(err)
	}
	got := owners(t, s, "ann.lee@work.test", "ANN@alumni.test", "bob@work.test", "b@example.com", "nobody@work.test")
	want := []string{"a@example.com", "a@example.com", "b@example.com", "b@example.com", ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("owners = %q, want %q", got, want)
	}
	r, err := s.Get(ctx, EmailKey("ann.lee@work.test"))
	if err != nil {
		t.Fatal(err)
	}
	// Normalised: lower-cased, trimmed, the own email, repeats and blanks dropped.
	if !reflect.DeepEqual(r.AltEmails, []string{"ann.lee@work.test", "ann@alumni.test"}) {
		t.Errorf("AltEmails = %q", r.AltEmails)
	}
	if r, _ := s.Get(ctx, EmailKey("c@example.com")); !reflect.DeepEqual(r.AltEmails, []string{"b@example.com"}) {
		t.Errorf("c's AltEmails = %v", r)
	}
	hh, err := s.Household(ctx, "H1")
	if err != nil || len(hh) != 2 || !reflect.DeepEqual(hh[1].AltEmails, []string{"bob@work.test"}) {
		t.Errorf("household = %+v, %v", hh, err)
	}
	if f, ok := s.(NamePostalFinder); ok {
		got, err := f.FindByNamePostal(ctx, []NamePostalKey{{Last: "Lee", Zip: "80203"}})
		if err != nil || len(got[0]) != 2 || len(got[0][0].AltEmails) != 2 {
			t.Errorf("FindByNamePostal = %+v, %v", got, err)
		}
	}
}

func testAltUpdates(t *testing.T, s Store) {
	ctx := context.Background()
	a := person("a@example.com", "Ann", "Lee", "H1")
	d := person("d@example.com", "Dee", "Lee", "H1")
	if err := s.Upsert(ctx, []Record{withAlts(a, "a2@work.test", "a3@work.test")}); err != nil {
		t.Fatal(err)
	}
	step := func(name string, recs []Record, addrs []string, want ...string) {
		t.Helper()
		if recs != nil {
			if err := s.Upsert(ctx, recs); err != nil {
				t.Fatal(err)
			}
		}
		if got := owners(t, s, addrs...); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: owners of %q = %q, want %q", name, addrs, got, want)
		}
	}
	addrs := []string{"a2@work.test", "a3@work.test", "a4@work.test"}
	step("replaced", []Record{withAlts(a, "a3@work.test", "a4@work.test")}, addrs, "", "a@example.com", "a@example.com")
	step("claimed by another", []Record{withAlts(d, "a3@work.test")}, addrs, "", "d@example.com", "a@example.com")
	step("claimed back", []Record{withAlts(a, "a3@work.test", "a4@work.test")}, addrs, "", "a@example.com", "a@example.com")
	// d no longer lists it, but a holds it: a keeps it.
	step("released by a loser", []Record{d}, addrs, "", "a@example.com", "a@example.com")
	// Two records of one batch list the same address: the later wins.
	step("one batch", []Record{withAlts(d, "x@work.test"), withAlts(a, "x@work.test")}, []string{"x@work.test", "a3@work.test"}, "a@example.com", "")
	if err := s.Delete(ctx, []string{"a@example.com"}); err != nil {
		t.Fatal(err)
	}
	step("after delete", nil, []string{"x@work.test", "d@example.com"}, "", "d@example.com")
}

func testAltInvalid(t *testing.T, s Store) {
	ctx := context.Background()
	many := make([]string, MaxAltEmails+1)
	for i := range many {
		many[i] = "p" + strings.Repeat("x", i) + "@work.test"
	}
	for _, tc := range []struct {
		name string
		alts []string
	}{
		{"not an address", []string{"ok@work.test", "not-an-address"}},
		{"too many", many},
	} {
		err := s.Upsert(ctx, []Record{person("ok@example.com", "O", "K", ""), withAlts(person("a@example.com", "A", "L", ""), tc.alts...)})
		var re *RecordError
		if !errors.As(err, &re) || re.Index != 1 || re.Err.Field != ColAltEmails {
			t.Errorf("%s: err = %v", tc.name, err)
		}
		if strings.Contains(err.Error(), "not-an-address") {
			t.Errorf("%s: the error carries the value: %v", tc.name, err)
		}
	}
	if got := owners(t, s, "ok@example.com", "ok@work.test"); !reflect.DeepEqual(got, []string{"", ""}) {
		t.Errorf("a refused batch wrote %q", got)
	}
}

// testAltLarge: the bulk path (COPY for PostgreSQL) with generated people,
// each found by every other address.
func testAltLarge(t *testing.T, s Store) {
	recs := GenerateSlice(9, 2000)
	if err := s.Upsert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	var addrs, want []string
	for _, r := range recs {
		for _, a := range r.AltEmails {
			addrs, want = append(addrs, a), append(want, r.Email)
		}
	}
	if len(addrs) < 300 {
		t.Fatalf("only %d other addresses among %d people", len(addrs), len(recs))
	}
	if got := owners(t, s, addrs...); !reflect.DeepEqual(got, want) {
		t.Fatal("some other address does not find its person")
	}
}

func testAltReopen(t *testing.T, u string) {
	s := openURL(t, u)
	if err := s.Upsert(context.Background(), []Record{withAlts(person("a@example.com", "A", "L", ""), "a2@work.test")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openURL(t, u)
	if got := owners(t, s, "a2@work.test"); got[0] != "a@example.com" {
		t.Fatalf("after reopen: %q", got)
	}
}

func TestStorePhones(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			s := b.openStore(t).(PhoneStore)
			recs := []PhoneStatus{
				{Phone: "+14155552671", Status: PhoneLive, Prepaid: new(true), ConnectedScore: new(85)},
				{Phone: "+442079460958", Status: PhoneDisconnected, Prepaid: new(false)},
				{Phone: "+18002752273"},
				{Phone: "+14155552671", Status: PhoneLive, Prepaid: new(false), ConnectedScore: new(0)}, // later wins
			}
			if err := s.UpsertPhones(ctx, recs); err != nil {
				t.Fatal(err)
			}
			for _, want := range recs[1:] {
				got, err := s.LookupPhone(ctx, want.Phone)
				if err != nil || got == nil || !reflect.DeepEqual(*got, want) {
					t.Errorf("LookupPhone(%s) = %+v, %v; want %+v", want.Phone, got, err, want)
				}
			}
			if got, err := s.LookupPhone(ctx, "+14155550000"); got != nil || err != nil {
				t.Errorf("unknown number: %+v, %v", got, err)
			}
			for _, bad := range []PhoneStatus{{Phone: "4155552671"}, {Phone: "+1 415 555 2671"}, {Phone: "+10995550100"},
				{Phone: "+14155552671", Status: "busy"}, {Phone: "+14155552671", ConnectedScore: new(101)}} {
				if err := s.UpsertPhones(ctx, []PhoneStatus{recs[1], bad}); !errors.Is(err, ErrInvalid) {
					t.Errorf("UpsertPhones(%+v) = %v", bad, err)
				}
			}
		})
	}
}

func TestParsePhoneStatus(t *testing.T) {
	for _, tc := range []struct {
		row   PhoneStatusRow
		want  PhoneStatus
		field string
	}{
		{row: PhoneStatusRow{Phone: "(415) 555-2671", Status: "Live", Prepaid: "yes", ConnectedScore: "71"},
			want: PhoneStatus{Phone: "+14155552671", Status: PhoneLive, Prepaid: new(true), ConnectedScore: new(71)}},
		{row: PhoneStatusRow{Phone: "020 7946 0958", Country: "gb", Status: "disconnected", Prepaid: "0"},
			want: PhoneStatus{Phone: "+442079460958", Status: PhoneDisconnected, Prepaid: new(false)}},
		{row: PhoneStatusRow{Phone: "+44 20 7946 0958"}, want: PhoneStatus{Phone: "+442079460958"}},
		{row: PhoneStatusRow{Phone: "12345"}, field: ColPhone},
		{row: PhoneStatusRow{Phone: "call me"}, field: ColPhone},
		{row: PhoneStatusRow{Phone: "4155552671", Country: "XX"}, field: ColPhoneCountry},
		{row: PhoneStatusRow{Phone: "4155552671", Status: "ringing"}, field: ColPhoneStatus},
		{row: PhoneStatusRow{Phone: "4155552671", Prepaid: "maybe"}, field: ColPrepaid},
		{row: PhoneStatusRow{Phone: "4155552671", ConnectedScore: "101"}, field: ColConnectedScore},
		{row: PhoneStatusRow{Phone: "4155552671", ConnectedScore: "7.5"}, field: ColConnectedScore},
		{row: PhoneStatusRow{Phone: "+442079460958", ConnectedScore: "50"}, field: ColConnectedScore}, // US numbers only
	} {
		got, err := ParsePhoneStatus(tc.row)
		var fe *FieldError
		switch {
		case tc.field == "" && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("%+v: %+v, %v; want %+v", tc.row, got, err, tc.want)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%+v: err %v, want a %s error", tc.row, err, tc.field)
		}
	}
}

func TestImportPhones(t *testing.T) {
	file := "Phone\tcountry\tstatus\tprepaid\tconnected_score\n" +
		"+1 415 555 2671\t\tlive\ttrue\t90\n" +
		"020 7946 0958\tGB\tdisconnected\t\t\n" +
		"12345\t\tlive\t\t\n" + // line 4: not a number
		"4155550100\t\tasleep\t\t\n" + // line 5: bad status
		"+1 800 275 2273\t\t\tfalse\t\n" +
		"too\tmany\tfields\there\tnow\textra\n" // line 7
	s := openURL(t, boltURL(t))
	res, err := Import(context.Background(), s, strings.NewReader(file), ImportOptions{Comma: '\t', ContinueOnError: true, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 6 || res.Imported != 3 || res.Failed != 3 {
		t.Fatalf("%+v", res)
	}
	wantErrs := []RowError{{Line: 4, Column: ColPhone, Reason: "not a valid phone number"},
		{Line: 5, Column: ColPhoneStatus, Reason: "not live or disconnected"}, {Line: 7, Reason: "6 fields, the header has 5"}}
	if !reflect.DeepEqual(res.Errors, wantErrs) {
		t.Errorf("errors = %+v", res.Errors)
	}
	got, err := s.(PhoneStore).LookupPhone(context.Background(), "+442079460958")
	if err != nil || got == nil || got.Status != PhoneDisconnected {
		t.Errorf("imported GB number = %+v, %v", got, err)
	}
	// Without continueOnError the first bad row stops it, after the rows
	// before it were written.
	s = openURL(t, boltURL(t))
	res, err = Import(context.Background(), s, strings.NewReader(file), ImportOptions{Comma: '\t'})
	var re *RowError
	if !errors.As(err, &re) || re.Line != 4 || res.Imported != 2 {
		t.Errorf("stopping import: %+v, %v", res, err)
	}
	for _, tc := range []struct{ header, want string }{
		{"phone,carrier\n", "column 2 is not a phone status column"},
		{"phone,status,Phone\n", "column 3 repeats"},
		{"first,last\n", `no "email" column (or, for a phone status file, no "phone" column)`},
	} {
		if _, err := Import(context.Background(), s, strings.NewReader(tc.header), ImportOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("header %q: err = %v, want %q", tc.header, err, tc.want)
		}
	}
	if _, err := Import(context.Background(), failingStore{}, strings.NewReader("phone\n+14155552671\n"), ImportOptions{}); err == nil ||
		!strings.Contains(err.Error(), "no phone status") {
		t.Errorf("a store without phone data: %v", err)
	}
}

func TestImportAltEmails(t *testing.T) {
	file := "email,first,alt_emails\n" +
		"a@example.com,Ann, A2@Work.test ; a3@work.test;\n" +
		"b@example.com,Bob,\n" +
		"c@example.com,Cy,not-an-address\n"
	s := openURL(t, boltURL(t))
	res, err := Import(context.Background(), s, strings.NewReader(file), ImportOptions{ContinueOnError: true})
	if err != nil || res.Imported != 2 || len(res.Errors) != 1 || res.Errors[0] != (RowError{Line: 4, Column: ColAltEmails, Reason: "not an email address"}) {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := owners(t, s, "a2@work.test", "a3@work.test"); !reflect.DeepEqual(got, []string{"a@example.com", "a@example.com"}) {
		t.Errorf("owners = %q", got)
	}
	// WriteCSV writes the column Import reads.
	var buf bytes.Buffer
	r := withAlts(person("w@example.com", "W", "X", ""), "w1@work.test", "w2@work.test")
	if err := WriteCSV(&buf, slices.Values([]Record{r})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), ",w1@work.test;w2@work.test\n") {
		t.Errorf("CSV: %s", buf.String())
	}
}
