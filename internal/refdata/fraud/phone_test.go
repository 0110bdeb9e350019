package fraud

import (
	"context"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// example returns libphonenumber's example number of a type, E.164.
func example(t *testing.T, region string, typ phonenumbers.PhoneNumberType) string {
	t.Helper()
	n := phonenumbers.GetExampleNumberForType(region, typ)
	if n == nil {
		t.Fatalf("no example %v number for %s", typ, region)
	}
	return phonenumbers.Format(n, phonenumbers.E164)
}

func TestPhoneSignals(t *testing.T) {
	geo := buildMMDB(t, []geoNet{{CIDR: "81.2.69.0/24", Country: "GB", Lat: 51.5, Lon: -0.09}})
	s := New(testConfig(t, nil), Deps{GeoIP: geo})
	gbMobile := example(t, "GB", phonenumbers.MOBILE)
	tests := []struct {
		name, phone, country, ip string
		status, lineType, pc     string
		want, notWant            []string
	}{
		{name: "malformed", phone: "call me maybe", status: PhoneMalformed, want: []string{ReasonPhoneMalformed}},
		{name: "too short", phone: "12345", status: PhoneInvalid, want: []string{ReasonPhoneInvalid}},
		{name: "unassigned area code", phone: "+1 099 555 1234", status: PhoneInvalid, want: []string{ReasonPhoneInvalid}},
		{name: "gb mobile", phone: gbMobile, country: "GB", status: PhoneValid, lineType: "mobile", pc: "GB",
			want: []string{ReasonPhoneMobile}, notWant: []string{ReasonPhoneCountryMismatch}},
		{name: "gb mobile national with country", phone: "0" + strings.TrimPrefix(gbMobile, "+44"), country: "gb",
			status: PhoneValid, lineType: "mobile", pc: "GB", want: []string{ReasonPhoneMobile}},
		{name: "gb voip", phone: example(t, "GB", phonenumbers.VOIP), status: PhoneValid, lineType: "voip", pc: "GB",
			want: []string{ReasonPhoneVOIP}},
		{name: "gb premium", phone: example(t, "GB", phonenumbers.PREMIUM_RATE), status: PhoneValid, lineType: "premium_rate", pc: "GB",
			want: []string{ReasonPhonePremium}},
		{name: "us toll free", phone: example(t, "US", phonenumbers.TOLL_FREE), country: "US", status: PhoneValid, lineType: "toll_free", pc: "US",
			want: []string{ReasonPhoneTollFree}},
		{name: "us number national", phone: "(201) 555-0123", country: "US", status: PhoneValid, lineType: "landline_or_mobile", pc: "US",
			notWant: []string{ReasonPhoneCountryMismatch, ReasonPhoneInvalid, ReasonPhoneLandline}}, // weight 0 by default
		{name: "country mismatch", phone: gbMobile, country: "US", status: PhoneValid, lineType: "mobile", pc: "GB",
			want: []string{ReasonPhoneCountryMismatch}},
		{name: "ip vs phone without country", phone: example(t, "DE", phonenumbers.MOBILE), ip: "81.2.69.9", status: PhoneValid,
			lineType: "mobile", pc: "DE", want: []string{ReasonIPPhoneCountry}, notWant: []string{ReasonPhoneCountryMismatch}},
		{name: "ip agrees with phone", phone: gbMobile, ip: "81.2.69.9", status: PhoneValid, lineType: "mobile", pc: "GB",
			notWant: []string{ReasonIPPhoneCountry}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Email: "ann@gmail.com", Phone: tc.phone, Country: tc.country, IP: tc.ip}
			a := s.Assess(context.Background(), testTenant, in, okResult(in.Email))
			p := a.Risk.Phone
			if p == nil {
				t.Fatal("risk.phone missing")
			}
			if p.Status != tc.status || p.LineType != tc.lineType || p.Country != tc.pc {
				t.Errorf("phone = %+v, want status %q line %q country %q", *p, tc.status, tc.lineType, tc.pc)
			}
			// No ownership source: every owner *_match is no_data.
			if o := p.Owner; o == nil || o.FirstNameMatch != NoData || o.LastNameMatch != NoData ||
				o.StreetMatch != NoData || o.CityMatch != NoData || o.ZipMatch != NoData {
				t.Errorf("phone.owner = %+v, want every *_match no_data", o)
			}
			checkCodes(t, a, tc.want, tc.notWant)
		})
	}
	t.Run("carrier", func(t *testing.T) {
		// Carrier data exists for many non-portable mobile ranges; the
		// field must at least not break the query.
		a := s.Assess(context.Background(), testTenant, Input{Email: "ann@gmail.com", Phone: gbMobile}, okResult("ann@gmail.com"))
		if a.Risk.Phone.Status != PhoneValid {
			t.Fatalf("status %q", a.Risk.Phone.Status)
		}
	})
}

func TestISOCountries(t *testing.T) {
	if len(isoCountries) != 249 {
		t.Errorf("%d ISO 3166-1 codes, want 249", len(isoCountries))
	}
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{"us", "US", true}, {" De ", "DE", true}, {"UK", "GB", true}, {"XX", "", false}, {"USA", "", false}, {"", "", false}} {
		got, ok := normCountry(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("normCountry(%q) = %q, %v", tc.in, got, ok)
		}
	}
	// Every region libphonenumber knows and ISO assigns is accepted.
	for r := range phonenumbers.GetSupportedRegions() {
		if _, ok := normCountry(r); !ok && r != "AC" && r != "TA" && r != "XK" {
			t.Errorf("region %s not an ISO country", r)
		}
	}
}
