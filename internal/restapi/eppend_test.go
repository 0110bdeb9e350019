package restapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

// appended is one entry of email_append or alternate_email.
type appended struct {
	Email     string `json:"email"`
	MatchType string `json:"email_match_type"`
}

// jsonInto decodes r's body into v, failing the test on a non-200.
func jsonInto(t *testing.T, r response, v any) {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
}

func addressesOf(p people.Record, level string) []appended {
	out := []appended{{p.Email, level}}
	for _, a := range p.AltEmails {
		out = append(out, appended{a, level})
	}
	return out
}

// uniqueWithAlts is uniqueByNamePostal's person, among those with other
// addresses.
func uniqueWithAlts(t *testing.T) people.Record {
	t.Helper()
	for _, p := range peopleData {
		if len(p.AltEmails) == 0 || p.Age == "" {
			continue
		}
		same := 0
		for _, o := range peopleData {
			if people.NormalizeName(o.First) == people.NormalizeName(p.First) && people.NormalizeName(o.Last) == people.NormalizeName(p.Last) &&
				(o.Zip == p.Zip || o.City == p.City && o.State == p.State) {
				same++
			}
		}
		if same == 1 {
			return p
		}
	}
	t.Fatal("no person with other addresses and a unique name and address")
	return people.Record{}
}

func TestEmailPostalAppend(t *testing.T) {
	p := uniqueWithAlts(t)
	nap := func(kv ...string) url.Values {
		v := url.Values{"api_key": {keyAppend}, "first": {p.First}, "last": {p.Last}, "street": {p.Street}, "city": {p.City}, "state": {p.State}, "zip": {p.Zip}}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				v.Del(kv[i])
			} else {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v
	}
	emailAppend := func(t *testing.T, v url.Values) []appended {
		t.Helper()
		var body struct {
			EmailAppend []appended `json:"email_append"`
		}
		jsonInto(t, getQuery(t, "/v5/eppend", v), &body)
		return body.EmailAppend
	}
	t.Run("email append", func(t *testing.T) {
		for name, v := range map[string]url.Values{
			"full":             nap(),
			"zip+4":            nap("zip", p.Zip+"-1234"),
			"zip4 parameter":   nap("zip", "", "zip4", p.Zip+"-0000"),
			"city and state":   nap("zip", ""),
			"state lower-case": nap("state", strings.ToLower(p.State)),
		} {
			if got, want := emailAppend(t, v), addressesOf(p, "Individual"); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %+v, want %+v", name, got, want)
			}
		}
	})
	t.Run("household", func(t *testing.T) {
		// Someone else at the person's street: the household's primary
		// member (first by email of those at that street with that last
		// name), as the list service answers.
		var primary people.Record
		for _, o := range peopleData {
			if o.HouseholdID == p.HouseholdID && people.NormalizeName(o.Last) == people.NormalizeName(p.Last) && (primary.Email == "" || o.Email < primary.Email) {
				primary = o
			}
		}
		if got, want := emailAppend(t, nap("first", "Zebulon")), addressesOf(primary, "Household"); !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v, want %+v", got, want)
		}
		if r := getQuery(t, "/v5/eppend", nap("first", "Zebulon", "match_type", "I")); r.code != 200 || string(r.body) != "{}\n" {
			t.Errorf("match_type=I: %d %s", r.code, r.body)
		}
	})
	t.Run("no match", func(t *testing.T) {
		for _, v := range []url.Values{nap("first", "Zebulon", "last", "Nobodyhere"), nap("first", "Zebulon", "street", strings.Repeat("9", 4000)+" Main St")} {
			if r := getQuery(t, "/v5/eppend", v); r.code != 200 || string(r.body) != "{}\n" {
				t.Errorf("%d %s", r.code, r.body)
			}
		}
	})
	t.Run("postal append", func(t *testing.T) {
		want := map[string]any{"postal_address": map[string]any{"first_name": p.First, "last_name": p.Last, "address": p.Street, "city": p.City, "state": p.State, "zip": p.Zip}}
		for name, v := range map[string]url.Values{
			"email":           {"api_key": {keyAppend}, "email": {" " + strings.ToUpper(p.Email)}},
			"md5_email":       {"api_key": {keyAppend}, "md5_email": {people.EmailMD5(p.Email)}},
			"sha1_email":      {"api_key": {keyAppend}, "sha1_email": {strings.ToUpper(people.EmailSHA1(p.Email))}},
			"digest in email": {"api_key": {keyAppend}, "email": {people.EmailSHA1(p.Email)}},
			"other address":   {"api_key": {keyAppend}, "email": {p.AltEmails[0]}},
			"hashed other":    {"api_key": {keyAppend}, "md5_email": {people.EmailMD5(p.AltEmails[0])}},
		} {
			if r := getQuery(t, "/v5/eppend", v); r.code != 200 || !reflect.DeepEqual(r.json(t), want) {
				t.Errorf("%s: %d %s", name, r.code, r.body)
			}
		}
		r := getQuery(t, "/v5/eppend", url.Values{"api_key": {keyAppend}, "email": {"nobody@nowhere.test"}})
		if r.code != http.StatusOK || string(r.body) != "{}\n" {
			t.Errorf("unknown email: %d %s", r.code, r.body)
		}
	})
	t.Run("in-body errors", func(t *testing.T) {
		other := "99501" // an Alaska ZIP code, for a person of another state
		if p.State == "AK" {
			other = "10001"
		}
		for _, tc := range []struct {
			name string
			q    url.Values
			msg  string
		}{
			{"name without address", url.Values{"api_key": {keyAppend}, "first": {"Ann"}, "last": {"Lee"}}, "Missing required input: zip, or city and state."},
			{"no last name", nap("last", ""), "Missing required input: last."},
			{"last name without letters", nap("last", "1234"), "Missing required input: last."},
			{"neither first nor street", nap("first", "", "street", ""), "Missing required input: first or street."},
			{"city without state", nap("zip", "", "state", ""), "Missing required input: zip, or city and state."},
			{"not a US state", nap("state", "ZZ"), "Invalid US postal address: state is not a US state."},
			{"zip not five digits", nap("zip", "1234"), "Invalid US postal address: zip is not a US ZIP code."},
			{"zip not a ZIP code", nap("zip", "<script>"), "Invalid US postal address: zip is not a US ZIP code."},
			{"unassigned prefix", nap("zip", "00000"), "Invalid US postal address: zip is not a US ZIP code."},
			{"zip of another state", nap("zip", other), "Invalid US postal address: zip is not in the state."},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := getQuery(t, "/v5/eppend", tc.q)
				want := map[string]any{"error_code": float64(400), "error_msg": tc.msg}
				if r.code != http.StatusOK || !reflect.DeepEqual(r.json(t), want) {
					t.Errorf("%d %s, want 200 %v", r.code, r.body, want)
				}
			})
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			q    url.Values
			code int
			body string
		}{
			{"nothing", url.Values{"api_key": {keyAppend}}, 400, "Missing query parameter(s).\n"},
			{"no key", url.Values{"email": {p.Email}}, 400, "Missing query parameter(s).\n"},
			{"bad email", url.Values{"api_key": {keyAppend}, "email": {"n/a"}}, 400, "Value of parameter 'email' is invalid.\n"},
			{"bad md5", url.Values{"api_key": {keyAppend}, "md5_email": {"abc"}}, 400, "Value of parameter 'md5_email' is invalid.\n"},
			{"oversized email", url.Values{"api_key": {keyAppend}, "email": {strings.Repeat("a", 5000) + "@good.test"}}, 400, "Value of parameter 'email' is invalid.\n"},
			{"bad match_type", nap("match_type", "X"), 400, "Value of parameter 'match_type' is invalid.\n"},
			{"unknown key", url.Values{"api_key": {"nope-nope-nope-nope"}, "email": {p.Email}}, 401, "Invalid API key.\n"},
			{"key not enabled", url.Values{"api_key": {keyDemo}, "email": {p.Email}}, 403, "This API key is not enabled for email_append.\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := getQuery(t, "/v5/eppend", tc.q)
				if r.code != tc.code || string(r.body) != tc.body {
					t.Errorf("%d %q, want %d %q", r.code, r.body, tc.code, tc.body)
				}
			})
		}
	})
}

func TestAlternateEmail(t *testing.T) {
	// A person with other addresses whose household has other members.
	var p people.Record
	var members []people.Record
	for _, c := range peopleData {
		var m []people.Record
		for _, o := range peopleData {
			if o.HouseholdID == c.HouseholdID && o.Email != c.Email {
				m = append(m, o)
			}
		}
		if len(c.AltEmails) > 0 && len(m) > 0 {
			p, members = c, m
			break
		}
	}
	if p.Email == "" {
		t.Fatal("no person with other addresses and a household")
	}
	// The store orders a household by email; peopleData is in generation order.
	var household []appended
	for _, e := range sortedEmails(members) {
		for _, m := range members {
			if m.Email == e {
				household = append(household, addressesOf(m, "Household")...)
			}
		}
	}
	without := func(list []appended, asked string) []appended {
		var out []appended
		for _, a := range list {
			if a.Email != asked {
				out = append(out, a)
			}
		}
		return out
	}
	all := append(addressesOf(p, "Individual"), household...)
	alt := p.AltEmails[0]
	ae := func(kv ...string) response {
		t.Helper()
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return getQuery(t, "/ae", v)
	}
	for _, tc := range []struct {
		name  string
		r     response
		asked string
	}{
		{"email", ae("api_key", keyAppend, "email", " "+strings.ToUpper(p.Email)+" "), p.Email},
		{"other address", ae("api_key", keyAppend, "email", alt), alt},
		{"md5_email", ae("api_key", keyAppend, "md5_email", people.EmailMD5(p.Email)), p.Email},
		{"sha1_email of the other address", ae("api_key", keyAppend, "sha1_email", strings.ToUpper(people.EmailSHA1(alt))), alt},
		{"digest in email", ae("api_key", keyAppend, "email", people.EmailMD5(alt)), alt},
		{"key for every service", ae("api_key", keyAll, "email", p.Email), p.Email},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body struct {
				AlternateEmail []appended `json:"alternate_email"`
			}
			jsonInto(t, tc.r, &body)
			if want := without(all, tc.asked); !reflect.DeepEqual(body.AlternateEmail, want) {
				t.Errorf("%+v\nwant %+v", body.AlternateEmail, want)
			}
		})
	}
	t.Run("no match", func(t *testing.T) {
		for _, r := range []response{
			ae("api_key", keyAppend, "email", "nobody@nowhere.test"),
			ae("api_key", keyAppend, "md5_email", people.EmailMD5("nobody@nowhere.test")),
		} {
			if r.code != http.StatusOK || string(r.body) != "{}\n" {
				t.Errorf("%d %s", r.code, r.body)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			r    response
			code int
			body string
		}{
			{"nothing", ae("api_key", keyAppend), 400, "Missing query parameter(s).\n"},
			{"only a name", ae("api_key", keyAppend, "first", p.First, "last", p.Last, "zip", p.Zip), 400, "Missing query parameter(s).\n"},
			{"no key", ae("email", p.Email), 400, "Missing query parameter(s).\n"},
			{"not an address", ae("api_key", keyAppend, "email", "n/a"), 400, "Value of parameter 'email' is invalid.\n"},
			{"hostile", ae("api_key", keyAppend, "email", "<script>alert(1)</script>"), 400, "Value of parameter 'email' is invalid.\n"},
			{"oversized", ae("api_key", keyAppend, "email", strings.Repeat("a", 10000)+"@good.test"), 400, "Value of parameter 'email' is invalid.\n"},
			{"bad md5", ae("api_key", keyAppend, "md5_email", "zz"), 400, "Value of parameter 'md5_email' is invalid.\n"},
			{"bad sha1", ae("api_key", keyAppend, "sha1_email", people.EmailMD5(p.Email)), 400, "Value of parameter 'sha1_email' is invalid.\n"},
			{"unknown key", ae("api_key", "nope-nope-nope-nope", "email", p.Email), 401, "Invalid API key.\n"},
			{"key not enabled", ae("api_key", keyDemo, "email", p.Email), 403, "This API key is not enabled for email_append.\n"},
			{"fraud key", ae("api_key", keyFraud, "email", p.Email), 403, "This API key is not enabled for email_append.\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.r.code != tc.code || string(tc.r.body) != tc.body {
					t.Errorf("%d %q, want %d %q", tc.r.code, tc.r.body, tc.code, tc.body)
				}
			})
		}
	})
}

func sortedEmails(recs []people.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Email)
	}
	slices.Sort(out)
	return out
}
