package people

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestValidEmail(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"ann@example.com", true},
		{"a.b+tag@mail.example.org", true},
		{"x@y.test", true},
		{"ann@example", false},
		{"@example.com", false},
		{"ann@", false},
		{"ann", false},
		{"a@b@example.com", false},
		{"ann lee@example.com", false},
		{".ann@example.com", false},
		{"ann.@example.com", false},
		{"ann@example..com", false},
		{"ann@-example.com", false},
		{"ann@example.com,bob@example.com", false},
		{"n/a", false},
		{"555-0100", false},
		{"", false},
		{strings.Repeat("a", 65) + "@example.com", false},
	} {
		if got := ValidEmail(tc.in); got != tc.want {
			t.Errorf("ValidEmail(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestEmailHashes(t *testing.T) {
	for _, in := range []string{"ann@example.com", "  Ann@Example.COM\t", "ANN@EXAMPLE.COM"} {
		m := md5.Sum([]byte("ann@example.com"))
		s := sha1.Sum([]byte("ann@example.com"))
		if got := EmailMD5(in); got != hex.EncodeToString(m[:]) {
			t.Errorf("EmailMD5(%q) = %s", in, got)
		}
		if got := EmailSHA1(in); got != hex.EncodeToString(s[:]) {
			t.Errorf("EmailSHA1(%q) = %s", in, got)
		}
	}
	// A known vector: MD5 of "test@example.com".
	if got := EmailMD5("Test@Example.com"); got != "55502f40dc8b7c769880b10874abc9d0" {
		t.Errorf("EmailMD5 vector = %s", got)
	}
}

func TestNormalizeValidate(t *testing.T) {
	base := Record{Email: "ann@example.com"}
	for _, tc := range []struct {
		name  string
		mod   func(*Record)
		check func(Record) bool
		field string // "" = valid
	}{
		{"minimal", func(r *Record) {}, nil, ""},
		{"email normalised", func(r *Record) { r.Email = " Ann@Example.COM " },
			func(r Record) bool { return r.Email == "ann@example.com" }, ""},
		{"buckets canonicalised", func(r *Record) {
			r.Gender, r.HomeOwnerStatus, r.LengthOfResidence, r.NetWorth = "MALE", "own", "less than 1 year", "1MM+"
		}, func(r Record) bool {
			return r.Gender == "Male" && r.HomeOwnerStatus == "Own" && r.LengthOfResidence == "Less than 1 year" && r.NetWorth == "1mm+"
		}, ""},
		{"trimmed", func(r *Record) { r.First, r.Age = "  Ann ", " 65+ " },
			func(r Record) bool { return r.First == "Ann" && r.Age == "65+" }, ""},
		{"state upper-cased", func(r *Record) { r.State = "co" }, func(r Record) bool { return r.State == "CO" }, ""},
		{"zip+4", func(r *Record) { r.Zip = "80203-1234" }, nil, ""},
		{"zip 9 digits", func(r *Record) { r.Zip = "802031234" }, nil, ""},
		{"zip leading zero", func(r *Record) { r.Zip = "02138" }, nil, ""},
		{"all buckets", func(r *Record) { *r = person("ann@example.com", "Ann", "Lee", "H1") }, nil, ""},
		{"no email", func(r *Record) { r.Email = "" }, nil, ColEmail},
		{"not an email", func(r *Record) { r.Email = "ann at example.com" }, nil, ColEmail},
		{"age", func(r *Record) { r.Age = "18-24" }, nil, ColAge},
		{"gender", func(r *Record) { r.Gender = "M" }, nil, ColGender},
		{"income", func(r *Record) { r.HouseholdIncome = "50000" }, nil, ColHouseholdIncome},
		{"home value", func(r *Record) { r.HomeMarketValue = "0-1k" }, nil, ColHomeMarketValue},
		{"owner", func(r *Record) { r.HomeOwnerStatus = "Lease" }, nil, ColHomeOwnerStatus},
		{"residence", func(r *Record) { r.LengthOfResidence = "21 Years" }, nil, ColLengthOfResidence},
		{"marital", func(r *Record) { r.MaritalStatus = "Divorced" }, nil, ColMaritalStatus},
		{"children", func(r *Record) { r.PresenceOfChildren = "3" }, nil, ColPresenceOfChildren},
		{"education", func(r *Record) { r.Education = "PhD" }, nil, ColEducation},
		{"occupation", func(r *Record) { r.Occupation = "Astronaut" }, nil, ColOccupation},
		{"state", func(r *Record) { r.State = "C0" }, nil, ColState},
		{"zip short", func(r *Record) { r.Zip = "8020" }, nil, ColZip},
		{"zip letters", func(r *Record) { r.Zip = "8020X" }, nil, ColZip},
		{"too long", func(r *Record) { r.City = strings.Repeat("x", MaxFieldLen+1) }, nil, ColCity},
		{"control", func(r *Record) { r.Street = "1 Main\nSt" }, nil, ColStreet},
		{"bad utf8", func(r *Record) { r.Last = "L\xffe" }, nil, ColLast},
		{"interests", func(r *Record) { r.Interests = allInterests + 1 }, nil, ColInterests},
	} {
		r := base
		tc.mod(&r)
		r.Normalize()
		err := r.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			if tc.check != nil && !tc.check(r) {
				t.Errorf("%s: normalised to %+v", tc.name, r)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want a FieldError for %s", tc.name, err, tc.field)
		}
	}
}

func TestErrorsCarryNoValues(t *testing.T) {
	secret := "very.secret.person@example.com"
	r := Record{Email: secret + " x", First: "Secretname\x01"}
	r.Normalize()
	if err := r.Validate(); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %v", err)
	}
	r = Record{Email: secret, First: "Secretname\x01"}
	if err := r.Validate(); err == nil || strings.Contains(strings.ToLower(err.Error()), "secret") {
		t.Errorf("error %v", err)
	}
}

func TestBuckets(t *testing.T) {
	for _, tc := range []struct {
		col         string
		n           int
		first, last string
	}{
		{ColAge, 7, "18-20", "65+"},
		{ColGender, 2, "Male", "Female"},
		{ColHouseholdIncome, 12, "0-15k", "250k+"},
		{ColNetWorth, 10, "0-5k", "1mm+"},
		{ColHomeOwnerStatus, 2, "Own", "Rent"},
		{ColLengthOfResidence, 21, "Less than 1 year", "20+ Years"},
		{ColMaritalStatus, 2, "Single", "Married"},
		{ColPresenceOfChildren, 2, "Yes", "No"},
		{ColLifeStageGroup, 6, "Young Singles", "Retirees"},
		{ColLifeStageSegment, 12, "Starting Out", "Senior Living"},
		{ColFinancialGroup, 5, "Stretched", "Affluent"},
		{ColFinancialSegment, 10, "Struggling Renters", "Top Tier Affluent"},
	} {
		b := Buckets(tc.col)
		if len(b) != tc.n || b[0] != tc.first || b[len(b)-1] != tc.last {
			t.Errorf("Buckets(%s) = %v", tc.col, b)
		}
	}
	if Buckets(ColFirst) != nil || Buckets("nope") != nil {
		t.Error("Buckets of a free-text or unknown column is not nil")
	}
	Buckets(ColAge)[0] = "changed"
	if Buckets(ColAge)[0] != "18-20" {
		t.Error("Buckets returns the package's slice")
	}
	if got := len(Columns()); got != 30 {
		t.Errorf("%d columns", got)
	}
	if Buckets(ColRFMLastOrder) != nil {
		t.Error("rfm fields have no buckets")
	}
	for i, g := range Buckets(ColLifeStageGroup) {
		for _, seg := range LifeStageSegments()[2*i : 2*i+2] {
			if SegmentGroup(seg) != g {
				t.Errorf("SegmentGroup(%q) = %q, want %q", seg, SegmentGroup(seg), g)
			}
		}
	}
	if SegmentGroup("nope") != "" {
		t.Error("SegmentGroup of an unknown segment")
	}
	r := person("ann@example.com", "Ann", "Lee", "H1")
	if r.Value(ColRFMAvgDollars) != "57.40" || r.Value(ColInterests) != "cooking;travel" || r.Value(ColAge) != "35-44" || r.Value("nope") != "" {
		t.Error("Value")
	}
	if got := DemographicColumns(); len(got) != 19 || got[0] != ColAge || got[len(got)-1] != ColRFMLastOrder {
		t.Errorf("DemographicColumns = %v", got)
	}
}

func TestValidateRFM(t *testing.T) {
	for _, tc := range []struct {
		field, value string
		ok           bool
	}{
		{ColRFMOfflineAvgDays, "0", true},
		{ColRFMOfflineAvgDays, "36500", true},
		{ColRFMOfflineAvgDays, "36501", false},
		{ColRFMOnlineAvgDays, "4.5", false},
		{ColRFMOnlineAvgDays, "-3", false},
		{ColRFMAvgDollars, "42", true},
		{ColRFMAvgDollars, "42.50", true},
		{ColRFMAvgDollars, "42.5", false},
		{ColRFMAvgDollars, "$42", false},
		{ColRFMAvgDollars, "1234567890", false},
		{ColRFMLastOrder, "2025-02-28", true},
		{ColRFMLastOrder, "2025-02-30", false},
		{ColRFMLastOrder, "2025-2-3", false},
		{ColRFMLastOrder, "03/02/2025", false},
		{ColLifeStageGroup, "retirees", true}, // case-insensitive, normalised
		{ColLifeStageGroup, "Gen Z", false},
	} {
		r := person("ann@example.com", "Ann", "Lee", "H1")
		*fieldByName[tc.field].get(&r) = " " + tc.value + " "
		r.Normalize()
		err := r.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s=%q: %v", tc.field, tc.value, err)
			continue
		}
		var fe *FieldError
		if err != nil && (!errors.As(err, &fe) || fe.Field != tc.field || strings.Contains(err.Error(), tc.value)) {
			t.Errorf("%s=%q: error %v", tc.field, tc.value, err)
		}
	}
}

func TestInterests(t *testing.T) {
	for _, tc := range []struct {
		in    string
		names []string
		err   bool
	}{
		{"", nil, false},
		{"travel", []string{"travel"}, false},
		{"Travel; cooking |golf;;", []string{"cooking", "golf", "travel"}, false},
		{"travel;skydiving", nil, true},
	} {
		s, err := ParseInterests(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("ParseInterests(%q): %v", tc.in, err)
			continue
		}
		if !tc.err && !reflect.DeepEqual(s.Names(), tc.names) {
			t.Errorf("ParseInterests(%q) = %v", tc.in, s.Names())
		}
	}
	s := mustInterests("golf", "books")
	if !s.Has("golf") || s.Has("travel") || s.Has("nope") || s.String() != "books;golf" {
		t.Errorf("set %v", s.Names())
	}
	m := s.Map()
	if len(m) != len(Buckets(ColInterests)) || !m["golf"] || m["travel"] {
		t.Errorf("Map = %v", m)
	}
	if _, err := InterestsOf("golf", "nope"); err == nil {
		t.Error("InterestsOf accepted an unknown name")
	}
	// JSON carries the CSV form.
	r := person("ann@example.com", "Ann", "Lee", "H1")
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"interests":"cooking;travel"`) {
		t.Fatalf("json: %s, %v", b, err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("json round trip: %+v, %v", back, err)
	}
}

func TestCodec(t *testing.T) {
	recs := append(GenerateSlice(3, 500), Record{Email: "min@example.com"}, person("ü@example.com", "Zoë", "Ñúñez", "H-ü"))
	for _, r := range recs {
		b := appendRecord(nil, &r)
		var got Record
		if err := decodeRecord(r.Email, b, &got); err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip of %+v: %+v, %v", r, got, err)
		}
		if h := storedHousehold(b); h != r.HouseholdID {
			t.Fatalf("storedHousehold = %q, want %q", h, r.HouseholdID)
		}
		for n := 0; n < len(b); n++ {
			if err := decodeRecord(r.Email, b[:n], &got); err == nil {
				t.Fatalf("decoding %d of %d bytes succeeded", n, len(b))
			}
		}
	}
	bad := appendRecord(nil, &recs[0])
	bad[0] = 9
	if err := decodeRecord("x@example.com", bad, new(Record)); err == nil {
		t.Error("unknown version decoded")
	}
	// More demographic codes or rfm fields than this program knows: corrupt.
	r := person("ann@example.com", "Ann", "Lee", "H1")
	b := appendRecord(nil, &r)
	more := slices.Clone(b)
	more[len(more)-rfmLen(&r)-2] = byte(len(rfmFields) + 1) // before the rfm fields and the alt count (0)
	if err := decodeRecord(r.Email, more, new(Record)); err == nil {
		t.Error("an rfm count beyond rfmFields decoded")
	}
}

// rfmLen is the length of r's encoded rfm fields (after their count).
func rfmLen(r *Record) int {
	n := 0
	for _, f := range rfmFields {
		n += 1 + len(*f.get(r))
	}
	return n
}

// appendRecordV1 writes the version 1 format, as files made before the rfm
// and segment fields hold.
func appendRecordV1(b []byte, r *Record) []byte {
	b = append(b, codecV1)
	for _, f := range textFields[1:] {
		s := *f.get(r)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for i := range codecV1DemoLen {
		f := &demoFields[i]
		var code byte
		if v := *f.get(r); v != "" {
			code = f.canon[v] + 1
		}
		b = append(b, code)
	}
	return binary.AppendUvarint(b, uint64(r.Interests))
}

// TestCodecV2 reads values written before version 3: every field but the
// other addresses.
func TestCodecV2(t *testing.T) {
	for _, r := range GenerateSlice(3, 300) {
		b := appendRecord(nil, &r)
		if len(r.AltEmails) > 0 {
			continue
		}
		b = b[:len(b)-1] // the alt count, 0
		b[0] = codecV2
		var got Record
		if err := decodeRecord(r.Email, b, &got); err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("v2 decode: %+v, %v; want %+v", got, err, r)
		}
		if err := decodeRecord(r.Email, append(b, 0), &got); err == nil {
			t.Fatal("a v2 value with trailing bytes decoded")
		}
	}
}

func TestCodecAltEmails(t *testing.T) {
	r := person("ann@example.com", "Ann", "Lee", "H1")
	r.AltEmails = []string{"ann.lee@work.test", "annl@example.net"}
	b := appendRecord(nil, &r)
	var got Record
	if err := decodeRecord(r.Email, b, &got); err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for n := 0; n < len(b); n++ {
		if err := decodeRecord(r.Email, b[:n], &got); err == nil {
			t.Fatalf("decoding %d of %d bytes succeeded", n, len(b))
		}
	}
	if err := decodeRecord(r.Email, append(slices.Clone(b), 0), &got); err == nil {
		t.Error("trailing bytes decoded")
	}
	// More addresses than a person may have: corrupt.
	many := appendRecord(nil, &Record{Email: "x@example.com"})
	many = append(many[:len(many)-1], MaxAltEmails+1)
	for range MaxAltEmails + 1 {
		many = append(many, 1, 'a')
	}
	if err := decodeRecord("x@example.com", many, &got); err == nil {
		t.Error("too many addresses decoded")
	}
}

// TestCodecV1 reads values written before version 2: the fields version 1
// had, the others unknown.
func TestCodecV1(t *testing.T) {
	for _, r := range GenerateSlice(3, 200) {
		b := appendRecordV1(nil, &r)
		var got Record
		if err := decodeRecord(r.Email, b, &got); err != nil {
			t.Fatal(err)
		}
		want := r
		want.LifeStageSegment, want.LifeStageGroup, want.FinancialSegment, want.FinancialGroup = "", "", "", ""
		want.RFMOfflineAvgDays, want.RFMOnlineAvgDays, want.RFMAvgDollars, want.RFMLastOrder = "", "", "", ""
		want.AltEmails = nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("v1 decode: %+v, want %+v", got, want)
		}
		if storedText(b, fieldZip) != r.Zip || storedHousehold(b) != r.HouseholdID {
			t.Fatal("stored text of a v1 value")
		}
		if err := decodeRecord(r.Email, append(b, 0), &got); err == nil {
			t.Fatal("a v1 value with trailing bytes decoded")
		}
	}
}
