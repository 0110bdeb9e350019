package restapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

// getText is a GET with the key and parameters in the query, validated
// against openapi.json like every response.
func getQuery(t *testing.T, path string, q url.Values) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, baseURL+path+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

// uniqueByNamePostal returns a person of peopleData whose first name is
// unique among the people sharing their last name and zip, and among those
// sharing their last name, city and state: the name/postal matcher finds
// them as an Individual either way.
func uniqueByNamePostal(t *testing.T) people.Record {
	t.Helper()
	for _, p := range peopleData {
		same := 0
		for _, o := range peopleData {
			if people.NormalizeName(o.First) == people.NormalizeName(p.First) && people.NormalizeName(o.Last) == people.NormalizeName(p.Last) &&
				(o.Zip == p.Zip || o.City == p.City && o.State == p.State) {
				same++
			}
		}
		if same == 1 && p.Age != "" && p.RFMLastOrder != "" {
			return p
		}
	}
	t.Fatal("no person with a unique name and address")
	return people.Record{}
}

func TestSingleDemographics(t *testing.T) {
	p := uniqueByNamePostal(t)
	match := func(t *testing.T, r response) map[string]any {
		t.Helper()
		if r.code != http.StatusOK {
			t.Fatalf("%d %s", r.code, r.body)
		}
		m := r.json(t)
		if m["match_level"] != "Individual" || m["age"] != p.Age || m["rfm_last_order"] != p.RFMLastOrder {
			t.Fatalf("not the person: %s", r.body)
		}
		return m
	}
	t.Run("identifiers", func(t *testing.T) {
		for name, q := range map[string]url.Values{
			"email":        {"api_key": {keyDemo}, "email": {strings.ToUpper(p.Email)}},
			"md5_email":    {"api_key": {keyDemo}, "md5_email": {people.EmailMD5(p.Email)}},
			"sha1_email":   {"api_key": {keyDemo}, "sha1_email": {strings.ToUpper(people.EmailSHA1(p.Email))}},
			"name+postal":  {"api_key": {keyDemo}, "first": {p.First}, "last": {p.Last}, "street": {p.Street}, "city": {p.City}, "state": {p.State}},
			"name+zip4":    {"api_key": {keyDemo}, "first": {p.First}, "last": {p.Last}, "zip4": {p.Zip + "-1234"}},
			"email+postal": {"api_key": {keyDemo}, "email": {p.Email}, "first": {p.First}, "last": {p.Last}, "street": {p.Street}, "city": {p.City}, "state": {p.State}},
		} {
			t.Run(name, func(t *testing.T) {
				m := match(t, getQuery(t, "/v5/td", q))
				if _, ok := m["email_validation"]; ok {
					t.Error("email_validation for a key not enabled for it")
				}
			})
		}
	})
	t.Run("email beats name and postal", func(t *testing.T) {
		plain := match(t, getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "email": {p.Email}, "first": {p.First}, "last": {p.Last}, "zip": {p.Zip}}))
		nap := match(t, getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "first": {p.First}, "last": {p.Last}, "zip": {p.Zip}}))
		if !(plain["match_confidence"].(float64) > nap["match_confidence"].(float64)) {
			t.Errorf("confidence: email %v, name+zip %v", plain["match_confidence"], nap["match_confidence"])
		}
	})
	t.Run("the same answer as bulk", func(t *testing.T) {
		single := getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "email": {p.Email}})
		b, _ := json.Marshal([]map[string]string{{"email": p.Email}})
		var many []json.RawMessage
		if err := json.Unmarshal(bulk(t, keyDemo, "", b).body, &many); err != nil || len(many) != 1 {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(single.body)) != string(many[0]) {
			t.Errorf("td %s\nbulk %s", single.body, many[0])
		}
	})
	t.Run("no match", func(t *testing.T) {
		r := getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "email": {"nobody@nowhere.test"}})
		if r.code != http.StatusOK || strings.TrimSpace(string(r.body)) != "{}" {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
	t.Run("fields", func(t *testing.T) {
		r := getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "email": {p.Email}, "fields": {"age,rfm_last_order"}})
		var m map[string]any
		_ = json.Unmarshal(r.body, &m)
		if len(m) != 2 || m["age"] != p.Age || m["rfm_last_order"] != p.RFMLastOrder {
			t.Errorf("fields=age,rfm_last_order: %s", r.body)
		}
	})
	t.Run("email_validation", func(t *testing.T) {
		allowed := []string{"ok", "status", "status_code", "domain_type", "email_correction"}
		check := func(t *testing.T, ev any, ok bool, status string) map[string]any {
			t.Helper()
			m, _ := ev.(map[string]any)
			if m == nil || m["ok"] != ok || m["status"] != status {
				t.Fatalf("email_validation %v, want ok %v status %s", ev, ok, status)
			}
			for k := range m {
				if !slices.Contains(allowed, k) {
					t.Errorf("email_validation has %q, which the ruby SDK cannot take", k)
				}
			}
			return m
		}
		// A key enabled for email_validation gets it without asking.
		r := getQuery(t, "/v5/td", url.Values{"api_key": {keyAll}, "email": {p.Email}})
		m := match(t, r)
		check(t, m["email_validation"], false, "invalid") // example.* and .test people: no such domain in the mail world
		// Asked for alone.
		r = getQuery(t, "/v5/td", url.Values{"api_key": {keyAll}, "email": {"john@good.test"}, "fields": {"email_validation"}})
		m = r.json(t)
		if len(m) != 1 {
			t.Errorf("fields=email_validation: %s", r.body)
		}
		check(t, m["email_validation"], true, "valid")
		// A mistyped provider: the correction the ruby SDK reads.
		r = getQuery(t, "/v5/td", url.Values{"api_key": {keyAll}, "email": {"john@gmial.com"}, "fields": {"email_validation"}})
		if ev := check(t, r.json(t)["email_validation"], false, "invalid"); ev["email_correction"] != "john@gmail.com" {
			t.Errorf("email_correction %v", ev["email_correction"])
		}
		// Asked for by a key that may not.
		r = getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "email": {p.Email}, "fields": {"age,email_validation"}})
		if r.code != http.StatusForbidden || !strings.Contains(string(r.body), "email_validation") {
			t.Errorf("%d %s", r.code, r.body)
		}
	})
	t.Run("plus left unencoded", func(t *testing.T) {
		ctx := context.Background()
		plus := people.Record{Email: "pat+news@example.com", First: "Pat", Last: "Plusser", Age: "45-54"}
		if err := peopleStore.Upsert(ctx, []people.Record{plus}); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, baseURL+"/v5/td?api_key="+keyDemo+"&email=pat+news@example.com", nil)
		if r := do(t, req); r.code != http.StatusOK || r.json(t)["age"] != "45-54" {
			t.Errorf("%d %s", r.code, r.body)
		}
	})
	t.Run("html", func(t *testing.T) {
		r := getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "email": {p.Email}, "format": {"html"}})
		body := string(r.body)
		if r.code != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, "<td>age</td><td>"+p.Age+"</td>") || !strings.Contains(body, "<td>match_level</td><td>Individual</td>") ||
			r.header.Get("Content-Security-Policy") == "" {
			t.Errorf("%d %v\n%s", r.code, r.header, body)
		}
		r = getQuery(t, "/v5/td", url.Values{"api_key": {keyDemo}, "email": {"nobody@nowhere.test"}, "format": {"html"}})
		if !strings.Contains(string(r.body), "No match.") {
			t.Errorf("no match: %s", r.body)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			q    url.Values
			code int
			body string
		}{
			{"no key", url.Values{"email": {p.Email}}, 400, "Missing query parameter(s).\n"},
			{"no identifier", url.Values{"api_key": {keyDemo}}, 400, "Missing query parameter(s).\n"},
			{"name only", url.Values{"api_key": {keyDemo}, "first": {"Ann"}, "last": {"Lee"}}, 400, "Missing query parameter(s).\n"},
			{"not an email", url.Values{"api_key": {keyDemo}, "email": {"milboj"}}, 400, "Value of parameter 'email' is invalid.\n"},
			{"no TLD", url.Values{"api_key": {keyDemo}, "email": {"milboj@com"}}, 400, "Value of parameter 'email' is invalid.\n"},
			{"bad md5", url.Values{"api_key": {keyDemo}, "md5_email": {"abc"}}, 400, "Value of parameter 'md5_email' is invalid.\n"},
			{"bad fields", url.Values{"api_key": {keyDemo}, "email": {p.Email}, "fields": {"age,shoe_size"}}, 400, "Value of parameter 'fields' is invalid.\n"},
			{"bad format", url.Values{"api_key": {keyDemo}, "email": {p.Email}, "format": {"xml"}}, 400, "Value of parameter 'format' is invalid.\n"},
			{"unknown key", url.Values{"api_key": {"nope-nope-nope-nope"}, "email": {p.Email}}, 401, "Invalid API key.\n"},
			{"key not enabled", url.Values{"api_key": {keyAcme}, "email": {p.Email}}, 403, "This API key is not enabled for demographics.\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := getQuery(t, "/v5/td", tc.q)
				if r.code != tc.code || string(r.body) != tc.body || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
					t.Errorf("%d %q (%s), want %d %q", r.code, r.body, r.header.Get("Content-Type"), tc.code, tc.body)
				}
			})
		}
	})
}

// TestListNotFoundPlainText: the published shape of an unknown list on
// status and purchase.
func TestListNotFoundPlainText(t *testing.T) {
	for _, method := range []string{"GET /v5/list/999999", "POST /v5/list/999999/purchase"} {
		m, path, _ := strings.Cut(method, " ")
		r := do(t, newRequest(t, m, path, keyAcme, nil, ""))
		if r.code != http.StatusNotFound || string(r.body) != "List not found: 999999\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: %d %q %s", method, r.code, r.body, r.header.Get("Content-Type"))
		}
	}
}
