package restapi_test

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

func TestPhoneVerification(t *testing.T) {
	// Reference data for two numbers, as a phone status Dataset loads it.
	err := peopleStore.(people.PhoneStore).UpsertPhones(context.Background(), []people.PhoneStatus{
		{Phone: "+14155552671", Status: people.PhoneLive, Prepaid: new(true), ConnectedScore: new(85)},
		{Phone: "+442079460958", Status: people.PhoneDisconnected, Prepaid: new(false)},
		{Phone: "+16502530001", ConnectedScore: new(12)}, // a score alone: status stays valid
	})
	if err != nil {
		t.Fatal(err)
	}
	pv := func(kv ...string) response {
		t.Helper()
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return getQuery(t, "/pv", v)
	}
	type obj = map[string]any
	for _, tc := range []struct {
		name string
		r    response
		want obj
	}{
		{"US, no reference data", pv("api_key", keyFraud, "phone", "(650) 253-0000"),
			obj{"phone_number": "16502530000", "line_type": "landline_or_mobile", "status": "valid", "country_code": "US", "country_calling_code": 1.0}},
		{"GB mobile: carrier data", pv("api_key", keyFraud, "phone", "+44 7400 123456"),
			obj{"phone_number": "447400123456", "line_type": "mobile", "carrier": "Three", "status": "valid", "country_code": "GB", "country_calling_code": 44.0}},
		{"US toll free, calling code given", pv("api_key", keyFraud, "phone", "1-800-275-2273"),
			obj{"phone_number": "18002752273", "line_type": "toll_free", "status": "valid", "country_code": "US", "country_calling_code": 1.0}},
		{"live, prepaid, score", pv("api_key", keyFraud, "phone", "415.555.2671"),
			obj{"phone_number": "14155552671", "line_type": "landline_or_mobile", "status": "live", "prepaid": true, "connected_score": 85.0, "country_code": "US", "country_calling_code": 1.0}},
		{"disconnected, national form with country", pv("api_key", keyAll, "phone", "020 7946 0958", "country", "gb"),
			obj{"phone_number": "442079460958", "line_type": "landline", "status": "disconnected", "prepaid": false, "country_code": "GB", "country_calling_code": 44.0}},
		{"score alone", pv("api_key", keyFraud, "phone", "+16502530001"),
			obj{"phone_number": "16502530001", "line_type": "landline_or_mobile", "status": "valid", "connected_score": 12.0, "country_code": "US", "country_calling_code": 1.0}},
		{"too short: invalid", pv("api_key", keyFraud, "phone", "12345"), obj{"phone_number": "12345", "status": "invalid"}},
		{"unassigned area code: invalid", pv("api_key", keyFraud, "phone", "+1 099 555 0100"), obj{"phone_number": "10995550100", "status": "invalid"}},
		{"national number read in the wrong country: invalid", pv("api_key", keyFraud, "phone", "020 7946 0958"), obj{"phone_number": "02079460958", "status": "invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.r.code != http.StatusOK {
				t.Fatalf("%d %s", tc.r.code, tc.r.body)
			}
			got, _ := tc.r.json(t)["phone_verification"].(map[string]any)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s\nwant %v", tc.r.body, tc.want)
			}
		})
	}
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			r    response
			code int
			body string
		}{
			{"no phone", pv("api_key", keyFraud), 400, "Missing query parameter(s).\n"},
			{"no key", pv("phone", "4155552671"), 400, "Missing query parameter(s).\n"},
			{"letters", pv("api_key", keyFraud, "phone", "1-800-FLOWERS"), 400, "Value of parameter 'phone' is invalid.\n"},
			{"hostile", pv("api_key", keyFraud, "phone", "415'; DROP TABLE x;--"), 400, "Value of parameter 'phone' is invalid.\n"},
			{"no digits", pv("api_key", keyFraud, "phone", "+()"), 400, "Value of parameter 'phone' is invalid.\n"},
			{"oversized", pv("api_key", keyFraud, "phone", strings.Repeat("1", 5000)), 400, "Value of parameter 'phone' is invalid.\n"},
			{"unknown country", pv("api_key", keyFraud, "phone", "4155552671", "country", "XX"), 400, "Value of parameter 'country' is invalid.\n"},
			{"country not a code", pv("api_key", keyFraud, "phone", "4155552671", "country", "United States"), 400, "Value of parameter 'country' is invalid.\n"},
			{"unknown key", pv("api_key", "nope-nope-nope-nope", "phone", "4155552671"), 401, "Invalid API key.\n"},
			{"key not enabled", pv("api_key", keyAppend, "phone", "4155552671"), 403, "This API key is not enabled for fraud.\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.r.code != tc.code || string(tc.r.body) != tc.body {
					t.Errorf("%d %q, want %d %q", tc.r.code, tc.r.body, tc.code, tc.body)
				}
			})
		}
	})
}
