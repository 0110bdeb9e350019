package fraud

import (
	"context"
	"testing"
)

func TestZipFormat(t *testing.T) {
	tests := []struct {
		country, zip string
		want         bool
	}{
		{"US", "94105", true}, {"US", "94105-1234", true}, {"US", "941051234", true}, {"US", "9410", false}, {"US", "ABCDE", false},
		{"CA", "K1A 0B1", true}, {"CA", "k1a0b1", true}, {"CA", "D1A 0B1", false}, {"CA", "12345", false},
		{"GB", "SW1A 1AA", true}, {"GB", "EC1A1BB", true}, {"GB", "M1 1AE", true}, {"GB", "B33 8TH", true}, {"GB", "GIR 0AA", true},
		{"GB", "12345", false}, {"GB", "SW1A", false},
		{"DE", "10115", true}, {"DE", "1011", false}, {"DE", "D-10115", false},
		{"NL", "1012 AB", true}, {"NL", "1012", false},
		{"ZZ", "anything", true}, // unknown format: accepted
	}
	for _, tc := range tests {
		if got := validZip(tc.country, tc.zip); got != tc.want {
			t.Errorf("validZip(%s, %q) = %v, want %v", tc.country, tc.zip, got, tc.want)
		}
	}
}

func TestUSZip3(t *testing.T) {
	tests := []struct {
		zip    string
		states []string
		ok     bool
	}{
		{"10001", []string{"NY"}, true}, {"94105", []string{"CA"}, true}, {"60601", []string{"IL"}, true},
		{"73301", []string{"TX"}, true}, {"73101", []string{"OK"}, true}, {"20500", []string{"DC"}, true},
		{"00601", []string{"PR"}, true}, {"96799", []string{"HI", "AS"}, true}, {"99501", []string{"AK"}, true},
		{"00001", nil, false}, {"71501", nil, false},
	}
	for _, tc := range tests {
		st, ok := usZipStates(tc.zip)
		if ok != tc.ok || len(st) != len(tc.states) {
			t.Errorf("usZipStates(%s) = %v, %v", tc.zip, st, ok)
			continue
		}
		for i := range st {
			if st[i] != tc.states[i] {
				t.Errorf("usZipStates(%s) = %v", tc.zip, st)
			}
		}
	}
	if _, err := parseZip3("100-101 NY\n101 NJ\n"); err == nil {
		t.Error("overlap not detected")
	}
	if _, err := parseZip3("100 XX\n"); err == nil {
		t.Error("unknown state not detected")
	}
}

func TestNormState(t *testing.T) {
	for in, want := range map[string]string{"ca": "CA", "California": "CA", " new  york ": "NY", "D.C.": "DC", "Washington DC": "DC", "N.Y.": "NY"} {
		if got, ok := normState(in); !ok || got != want {
			t.Errorf("normState(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := normState("Bavaria"); ok {
		t.Error("Bavaria is a US state")
	}
}

func TestPostalSignals(t *testing.T) {
	people := fakePeople{
		"ann.lee@gmail.com": {"Ann", "Lee", "123 Main Street", "San Francisco", "94105"},
		"bo@gmail.com":      {"Bo", "", "", "", ""},
	}
	s := New(DefaultConfig(), Deps{People: people})
	tests := []struct {
		name          string
		in            Input
		first, last   string
		street, city  string
		zip           string
		deliv, sub    string
		addrType      string
		want, notWant []string
	}{
		{name: "all match", in: Input{Email: "Ann.Lee@gmail.com", First: "ANN", Last: "lee", Street: "123 main st.", City: "san francisco", State: "CA", Zip: "94105-2001", Country: "US"},
			first: Match, last: Match, street: Match, city: Match, zip: Match, deliv: "unverified", addrType: "street",
			want:    []string{ReasonFirstNameMatch, ReasonLastNameMatch, ReasonStreetMatch, ReasonCityMatch, ReasonZipMatch},
			notWant: []string{ReasonZipInvalid, ReasonZipStateMismatch}},
		{name: "stolen identity", in: Input{Email: "ann.lee@gmail.com", First: "Ann", Last: "Lee", Street: "9 Elm Road", City: "Miami", State: "FL", Zip: "33101", Country: "US"},
			first: Match, last: Match, street: NoMatch, city: NoMatch, zip: NoMatch, deliv: "unverified", addrType: "street",
			want: []string{ReasonStreetNoMatch, ReasonCityNoMatch, ReasonZipNoMatch}},
		{name: "no record", in: Input{Email: "zed@gmail.com", First: "Zed", Zip: "10001", State: "NY"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified",
			notWant: []string{ReasonFirstNameNoMatch, ReasonZipInvalid}},
		{name: "record without fields", in: Input{Email: "bo@gmail.com", First: "Bob", Last: "Smith"},
			first: NoMatch, last: NoData, street: NoData, city: NoData, zip: NoData,
			want: []string{ReasonFirstNameNoMatch}, notWant: []string{ReasonLastNameNoMatch}},
		{name: "zip state mismatch", in: Input{Email: "x@gmail.com", State: "TX", Zip: "10001", Country: "US"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified", sub: "zip_state_mismatch",
			want: []string{ReasonZipStateMismatch}},
		{name: "state by name, country inferred", in: Input{Email: "x@gmail.com", State: "Texas", Zip: "10001"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified", sub: "zip_state_mismatch",
			want: []string{ReasonZipStateMismatch}},
		{name: "us zip bad format", in: Input{Email: "x@gmail.com", Zip: "1234", Country: "US"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "undeliverable", sub: "zip_invalid",
			want: []string{ReasonZipInvalid}},
		{name: "us zip unassigned", in: Input{Email: "x@gmail.com", Zip: "00012", State: "NY", Country: "US"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "undeliverable", sub: "zip_invalid",
			want: []string{ReasonZipInvalid}, notWant: []string{ReasonZipStateMismatch}},
		{name: "us unknown state", in: Input{Email: "x@gmail.com", Zip: "10001", State: "Bavaria", Country: "US"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified", sub: "state_unknown",
			want: []string{ReasonStateUnknown}},
		{name: "gb ok", in: Input{Email: "x@gmail.com", Zip: "SW1A 1AA", City: "London", Country: "GB"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified",
			notWant: []string{ReasonZipInvalid}},
		{name: "de bad", in: Input{Email: "x@gmail.com", Zip: "SW1A 1AA", Country: "DE"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "undeliverable", sub: "zip_invalid",
			want: []string{ReasonZipInvalid}},
		{name: "ca ok", in: Input{Email: "x@gmail.com", Zip: "K1A 0B1", State: "ON", Country: "CA"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified",
			notWant: []string{ReasonZipInvalid, ReasonStateUnknown}},
		{name: "unknown country skips zip check", in: Input{Email: "x@gmail.com", Zip: "???", Country: "QQ"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified", sub: "country_unknown",
			want: []string{ReasonCountryUnknown}, notWant: []string{ReasonZipInvalid}},
		{name: "po box", in: Input{Email: "x@gmail.com", Street: "P.O. Box 123", Zip: "10001", Country: "US"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified", addrType: "po_box"},
		{name: "military", in: Input{Email: "x@gmail.com", Street: "PSC 1234, Box 5678", State: "AE", Zip: "09012"},
			first: NoData, last: NoData, street: NoData, city: NoData, zip: NoData, deliv: "unverified", addrType: "military",
			notWant: []string{ReasonZipStateMismatch, ReasonZipInvalid}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := s.Assess(context.Background(), testTenant, tc.in, okResult(tc.in.Email))
			p := a.Risk.Postal
			if p == nil {
				t.Fatal("risk.postal missing")
			}
			got := [5]string{p.FirstNameMatch, p.LastNameMatch, p.StreetMatch, p.CityMatch, p.ZipMatch}
			want := [5]string{tc.first, tc.last, tc.street, tc.city, tc.zip}
			if got != want {
				t.Errorf("matches %v, want %v", got, want)
			}
			if p.Deliverability != tc.deliv || p.DeliverabilitySubstatus != tc.sub || p.AddressType != tc.addrType {
				t.Errorf("postal = %+v, want deliverability %q/%q type %q", *p, tc.deliv, tc.sub, tc.addrType)
			}
			checkCodes(t, a, tc.want, tc.notWant)
		})
	}
	t.Run("no postal input no object", func(t *testing.T) {
		a := s.Assess(context.Background(), testTenant, Input{Email: "ann.lee@gmail.com"}, okResult("ann.lee@gmail.com"))
		if a.Risk.Postal != nil {
			t.Errorf("postal = %+v", a.Risk.Postal)
		}
	})
}

func TestNormalizers(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"123 Main Street", "123 main st."}, {"45 N. Oak Avenue, Apt 4", "45 north oak ave apt 4"},
		{"Hauptstraße 5", "hauptstrasse 5"},
	} {
		if normStreet(tc.a) != normStreet(tc.b) {
			t.Errorf("normStreet: %q (%q) != %q (%q)", tc.a, normStreet(tc.a), tc.b, normStreet(tc.b))
		}
	}
	if normCity("St. Louis") != normCity("Saint Louis") {
		t.Error("St. Louis != Saint Louis")
	}
	if normZip("94105-1234") != "94105" || normZip("sw1a 1aa") != "SW1A1AA" {
		t.Error("normZip")
	}
}

func TestUSPostal(t *testing.T) {
	for _, tc := range []struct{ state, zip, code, problem string }{
		{"PA", "15231", "PA", ""},
		{" pennsylvania ", "15231-0000", "PA", ""},
		{"", "152310000", "", ""},
		{"", "", "", ""},
		{"ZZ", "15231", "", USPostalState},
		{"PA", "1523", "PA", USPostalZip},
		{"PA", "ABCDE", "PA", USPostalZip},
		{"", "00000", "", USPostalZip}, // unassigned prefix
		{"CA", "15231", "CA", USPostalZipState},
	} {
		code, problem := USPostal(tc.state, tc.zip)
		if code != tc.code || problem != tc.problem {
			t.Errorf("USPostal(%q, %q) = %q, %q; want %q, %q", tc.state, tc.zip, code, problem, tc.code, tc.problem)
		}
	}
}
