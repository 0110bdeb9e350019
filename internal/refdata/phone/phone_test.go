package phone

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, raw, region string
		want              Number
		err               error
	}{
		{name: "US mobile or landline, national", raw: "(415) 555-2671", want: Number{Digits: "4155552671", Valid: true, E164: "+14155552671", Region: "US", CallingCode: 1, LineType: LineLandlineOrMobile}},
		{name: "US with calling code", raw: "1 415 555 2671", want: Number{Digits: "14155552671", Valid: true, E164: "+14155552671", Region: "US", CallingCode: 1, LineType: LineLandlineOrMobile}},
		{name: "US toll free", raw: "+1 800 275 2273", want: Number{Digits: "18002752273", Valid: true, E164: "+18002752273", Region: "US", CallingCode: 1, LineType: LineTollFree}},
		{name: "GB mobile with carrier data", raw: "+44 7400 123456", want: Number{Digits: "447400123456", Valid: true, E164: "+447400123456", Region: "GB", CallingCode: 44, LineType: LineMobile, Carrier: "Three"}},
		{name: "GB national with region", raw: "020 7946 0958", region: "GB", want: Number{Digits: "02079460958", Valid: true, E164: "+442079460958", Region: "GB", CallingCode: 44, LineType: LineLandline}},
		{name: "too short", raw: "12345", want: Number{Digits: "12345"}},
		{name: "unassigned US area code", raw: "+1 099 555 0100", want: Number{Digits: "10995550100"}},
		{name: "letters", raw: "1-800-FLOWERS", err: ErrMalformed},
		{name: "no digits", raw: "+ ( ) -", err: ErrMalformed},
		{name: "empty", raw: "", err: ErrMalformed},
		{name: "hostile", raw: "415<script>", err: ErrMalformed},
		{name: "too long", raw: "1234567890123456789012345678901234567890123456789012345678901234567890", err: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.raw, tc.region)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if got != tc.want {
				t.Errorf("Parse(%q, %q) = %+v, want %+v", tc.raw, tc.region, got, tc.want)
			}
		})
	}
}

func TestRegion(t *testing.T) {
	for in, want := range map[string]string{"us": "US", " GB ": "GB", "uk": "GB", "DE": "DE", "XX": "", "USA": "", "": "", "1": ""} {
		got, ok := Region(in)
		if got != want || ok != (want != "") {
			t.Errorf("Region(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
