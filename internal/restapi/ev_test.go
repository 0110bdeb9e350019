package restapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func ev(t *testing.T, params url.Values) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, baseURL+"/v5/ev?"+params.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("accept", "application/json")
	return do(t, req)
}

// TestVerifyEmailEndpoint: GET /v5/ev answers, and refuses, as specified.
func TestVerifyEmailEndpoint(t *testing.T) {
	cases := []struct {
		name   string
		params url.Values
		code   int
		body   string // exact plain-text body, or a JSON fragment
	}{
		{"missing email", q("api_key", keyAcme), 400, "Missing query parameter(s).\n"},
		{"missing key", q("email", "a@good.test"), 400, "Missing query parameter(s).\n"},
		{"invalid key", q("api_key", "nope-nope-nope-nope", "email", "a@good.test"), 401, "Invalid API key.\n"},
		{"key not enabled", q("api_key", keyReporter, "email", "a@good.test"), 403, "This API key is not enabled for email_validation.\n"},
		{"bad timeout", q("api_key", keyAcme, "email", "a@good.test", "timeout", "soon"), 400, "timeout must be a number of seconds greater than 0.\n"},
		{"bad max_age", q("api_key", keyAcme, "email", "a@good.test", "max_age", "a week"), 400, "max_age must be a number of seconds, 0 or more.\n"},
		{"negative max_age", q("api_key", keyAcme, "email", "a@good.test", "max_age", "-1"), 400, "max_age must be a number of seconds, 0 or more.\n"},
		{"max_age 0", q("api_key", keyAcme, "email", "john@good.test", "max_age", "0"),
			200, `{"safe_to_send":{"status":"valid","status_code":20,"address":"john@good.test","domain_type":"biz"}}`},
		{"valid domain", q("api_key", keyAcme, "email", "john@good.test", "timeout", "2.5"),
			200, `{"safe_to_send":{"status":"valid","status_code":20,"address":"john@good.test","domain_type":"biz"}}`},
		{"role account", q("api_key", keyAcme, "email", "sales@good.test"),
			200, `{"safe_to_send":{"status":"valid","status_code":20,"address":"sales@good.test","domain_type":"biz","role_account":true}}`},
		{"no such domain", q("api_key", keyAcme, "email", "x@gone.test"),
			200, `{"safe_to_send":{"status":"invalid","status_code":310,"address":"x@gone.test","domain_type":"biz"}}`},
		{"disposable", q("api_key", keyAcme, "email", "x@mailinator.com"),
			200, `{"safe_to_send":{"status":"trap","status_code":525,"address":"x@mailinator.com","domain_type":"disposable"}}`},
		{"more than one @", q("api_key", keyAcme, "email", "john@@good.test"),
			200, `{"safe_to_send":{"status":"invalid","status_code":155,"address":"john@@good.test","email_corrections":["john@good.test"]}}`},
		{"malformed echoed", q("api_key", keyAcme, "email", " not an email "),
			200, `"address":" not an email "`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ev(t, tc.params)
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r.body)
			}
			if tc.code != 200 {
				if string(r.body) != tc.body || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
					t.Fatalf("body %q (%s), want %q as text/plain", r.body, r.header.Get("Content-Type"), tc.body)
				}
				return
			}
			var m map[string]any
			if err := json.Unmarshal(r.body, &m); err != nil || len(m) != 1 {
				t.Fatalf("body %s: want exactly {\"safe_to_send\": {...}}", r.body)
			}
			if !strings.Contains(strings.TrimSpace(string(r.body)), tc.body) {
				t.Errorf("body %s, want %s", r.body, tc.body)
			}
		})
	}
}
