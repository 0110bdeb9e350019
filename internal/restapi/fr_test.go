package restapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func fr(t *testing.T, params url.Values) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, baseURL+"/fr?"+params.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("accept", "application/json")
	return do(t, req)
}

// TestFraudEndpoint: the /fr contract from the spec.
func TestFraudEndpoint(t *testing.T) {
	refusals := []struct {
		name   string
		params url.Values
		code   int
		body   string
	}{
		{"missing email", q("api_key", keyFraud), 400, "Missing query parameter(s).\n"},
		{"empty email", q("api_key", keyFraud, "email", ""), 400, "Missing query parameter(s).\n"},
		{"invalid key", q("api_key", "nope-nope-nope-nope", "email", "a@good.test"), 401, "Invalid API key.\n"},
		{"key not enabled", q("api_key", keyAcme, "email", "a@good.test"), 403, "This API key is not enabled for fraud.\n"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			r := fr(t, tc.params)
			if r.code != tc.code || string(r.body) != tc.body {
				t.Fatalf("%d %q, want %d %q", r.code, r.body, tc.code, tc.body)
			}
		})
	}

	type assessment struct {
		Assessment  string `json:"assessment"`
		ReferenceID string `json:"reference_id"`
		Risk        struct {
			Score   int    `json:"score"`
			QueryID string `json:"query_id"`
		} `json:"risk"`
		EmailValidation struct {
			Status      string   `json:"status"`
			Code        int      `json:"status_code"`
			Corrections []string `json:"email_corrections"`
		} `json:"email_validation"`
		Reasons []struct {
			Code string `json:"code"`
		} `json:"reasons"`
	}
	get := func(t *testing.T, params url.Values) assessment {
		t.Helper()
		r := fr(t, params)
		if r.code != http.StatusOK {
			t.Fatalf("%d %s", r.code, r.body)
		}
		var a assessment
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatal(err)
		}
		if a.Risk.Score < 0 || a.Risk.Score > 100 || a.Risk.QueryID == "" || len(a.Reasons) == 0 && a.Risk.Score > 0 {
			t.Errorf("risk %+v reasons %v", a.Risk, a.Reasons)
		}
		return a
	}

	t.Run("complete data", func(t *testing.T) {
		a := get(t, q("api_key", keyFraud, "email", "jane.doe@good.test", "reference_id", "order-42",
			"first", "Jane", "last", "Doe", "street", "1 Main St", "city", "Springfield", "state", "IL",
			"zip", "62701", "country", "US", "phone", "+1 217 555 0142", "ip", "8.8.8.8", "user_agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/130.0"))
		if a.ReferenceID != "order-42" || a.Assessment != "unlikely_fraud" || a.EmailValidation.Status != "valid" {
			t.Errorf("%+v", a)
		}
	})
	t.Run("email only", func(t *testing.T) {
		a := get(t, q("api_key", keyFraud, "email", "jane.doe@good.test"))
		if a.EmailValidation.Code != 20 {
			t.Errorf("%+v", a)
		}
	})
	t.Run("mistyped email gets a correction", func(t *testing.T) {
		a := get(t, q("api_key", keyFraud, "email", "jane@gmail,com"))
		if a.EmailValidation.Status != "invalid" || len(a.EmailValidation.Corrections) == 0 || a.EmailValidation.Corrections[0] != "jane@gmail.com" {
			t.Errorf("%+v", a.EmailValidation)
		}
	})
	t.Run("unusable email: invalid, no correction", func(t *testing.T) {
		a := get(t, q("api_key", keyFraud, "email", "not an email at all"))
		if a.EmailValidation.Status != "invalid" || len(a.EmailValidation.Corrections) != 0 {
			t.Errorf("%+v", a.EmailValidation)
		}
	})
	t.Run("bad optional inputs are signals, not errors", func(t *testing.T) {
		a := get(t, q("api_key", keyFraud, "email", "x8f7q2kz9w@mailinator.com", "ip", "999.1.1.1",
			"country", "ZZ", "phone", "12", "user_agent", "HeadlessChrome/120"))
		if a.Assessment != "likely_fraud" {
			t.Errorf("assessment %q, score %d", a.Assessment, a.Risk.Score)
		}
		var codes []string
		for _, r := range a.Reasons {
			codes = append(codes, r.Code)
		}
		joined := strings.Join(codes, " ")
		for _, want := range []string{"ip", "phone", "country", "disposable"} {
			if !strings.Contains(strings.ToLower(joined), want) {
				t.Errorf("reasons %v lack a %q signal", codes, want)
			}
		}
	})
}

// TestFraudPostalMatch: with the reference store, *_match fields compare
// the input with the person the email belongs to.
func TestFraudPostalMatch(t *testing.T) {
	p := peopleData[3]
	r := fr(t, q("api_key", keyFraud, "email", p.Email, "first", p.First, "last", "Someone-Else", "zip", p.Zip, "country", "US"))
	if r.code != http.StatusOK {
		t.Fatalf("%d %s", r.code, r.body)
	}
	var a struct {
		Risk struct {
			Postal map[string]string `json:"postal"`
		} `json:"risk"`
	}
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	if a.Risk.Postal["first_name_match"] != "match" || a.Risk.Postal["last_name_match"] != "no_match" || a.Risk.Postal["zip_match"] != "match" {
		t.Errorf("postal %v", a.Risk.Postal)
	}
	r = fr(t, q("api_key", keyFraud, "email", "stranger@good.test", "first", "Ann"))
	_ = json.Unmarshal(r.body, &a)
	if a.Risk.Postal["first_name_match"] == "match" {
		t.Errorf("an unknown email cannot match a name: %v", a.Risk.Postal)
	}
}
