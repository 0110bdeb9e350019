package restapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

func bulk(t *testing.T, key, query string, body []byte) response {
	t.Helper()
	req := newRequest(t, http.MethodPost, "/v5/ei/bulk?api_key="+key+query, "", body, "application/json")
	return do(t, req)
}

// TestBulkDemographics: the bulk append contract.
func TestBulkDemographics(t *testing.T) {
	p := peopleData[0]
	other := peopleData[1]
	items := []map[string]any{
		{"email": p.Email, "first": p.First, "last": p.Last, "street": p.Street, "city": p.City, "state": p.State, "zip": p.Zip},
		{"email": "  " + strings.ToUpper(p.Email) + " "},
		{"md5_email": people.EmailMD5(p.Email)},
		{"email": "not an email"},
		{"email": "nobody@nowhere.test"},
		{"sha1_email": people.EmailSHA1(other.Email), "first": other.First},
		{"email": 42}, // a bad item
		{"first": other.First, "last": other.Last, "zip4": other.Zip + "-0001"}, // name and zip4, no email
		{"md5_email": "not-a-digest"},
		{},
		{"email": "nobody@nowhere.test", "first": p.First, "last": p.Last, "street": p.Street, "city": p.City, "state": p.State},
	}
	body, _ := json.Marshal(items)
	r := bulk(t, keyDemo, "", body)
	if r.code != http.StatusOK {
		t.Fatalf("%d %s", r.code, r.body)
	}
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil || len(out) != len(items) {
		t.Fatalf("want %d results in order: %s", len(items), r.body)
	}
	if out[0]["age"] != p.Age || out[0]["match_level"] != "Individual" {
		t.Errorf("full match: %v (want age %q)", out[0], p.Age)
	}
	// Every published field the person has is there.
	for _, col := range people.DemographicColumns() {
		if v := p.Value(col); v != "" && out[0][col] != v {
			t.Errorf("full match: %s = %v, want %q", col, out[0][col], v)
		}
	}
	if in, ok := out[0]["interests"].(map[string]any); p.Interests != 0 && (!ok || len(in) != len(people.Buckets("interests"))) {
		t.Errorf("full match: interests %v", out[0]["interests"])
	}
	// A well-formed identifier that matches nobody: {}.
	if len(out[4]) != 0 {
		t.Errorf("item 4: %v, want {}", out[4])
	}
	// An unusable identifier: the published error object in place.
	for _, i := range []int{3, 8, 9} {
		if out[i]["error_code"] != float64(400) || out[i]["error_msg"] != "Invalid identifier" || len(out[i]) != 2 {
			t.Errorf("item %d: %v, want the Invalid identifier object", i, out[i])
		}
	}
	if out[6]["error_code"] != float64(400) || out[6]["error_msg"] != "email must be a string, not a number" || len(out[6]) != 2 {
		t.Errorf("item 6 (a number for the email): %v, want an error object naming the field", out[6])
	}
	// Name and postal address without a usable email: the email append rules.
	if out[7]["match_level"] != "Individual" || out[7]["zip"] != other.Zip {
		t.Errorf("name + zip4: %v", out[7])
	}
	if out[10]["match_level"] != "Individual" || out[10]["age"] != p.Age {
		t.Errorf("unknown email, then name + street, city, state: %v", out[10])
	}
	conf := func(i int) float64 { c, _ := out[i]["match_confidence"].(float64); return c }
	if !(conf(0) > conf(1) && conf(1) > conf(2) && conf(2) > 0) {
		t.Errorf("confidence must rank email+name+postal > email > md5: %v %v %v", conf(0), conf(1), conf(2))
	}
	if out[5]["match_level"] != "Individual" || out[5]["zip"] != other.Zip {
		t.Errorf("sha1 + first: %v", out[5])
	}

	t.Run("fields filter", func(t *testing.T) {
		r := bulk(t, keyDemo, "&fields=age,gender", body[:0:0])
		_ = r
		b, _ := json.Marshal([]map[string]string{{"email": p.Email}})
		r = bulk(t, keyDemo, "&fields=age,gender", b)
		var got []map[string]any
		_ = json.Unmarshal(r.body, &got)
		for k := range got[0] {
			if k != "age" && k != "gender" {
				t.Errorf("field %q not filtered out: %v", k, got[0])
			}
		}
		// The filter applies to every field, match_level and the rfm ones too.
		r = bulk(t, keyDemo, "&fields=match_level,rfm_last_order,life_stage_group", b)
		got = nil
		_ = json.Unmarshal(r.body, &got)
		want := map[string]any{"match_level": "Individual"}
		if p.RFMLastOrder != "" {
			want["rfm_last_order"] = p.RFMLastOrder
		}
		if p.LifeStageGroup != "" {
			want["life_stage_group"] = p.LifeStageGroup
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Errorf("fields=match_level,rfm_last_order,life_stage_group: %v, want %v", got, want)
		}
	})

	cases := []struct {
		name string
		key  string
		q    string
		body []byte
		code int
		msg  string
	}{
		{"5,001 items", keyDemo, "", []byte("[" + strings.Repeat(`{"email":"a@b.test"},`, 5000) + `{"email":"a@b.test"}]`), 413, "at most 5000 people"},
		{"malformed JSON", keyDemo, "", []byte(`[{"email": "a@b.test"`), 400, "unexpected end"},
		{"not an array", keyDemo, "", []byte(`{"email":"a@b.test"}`), 400, "JSON array"},
		{"unknown field", keyDemo, "&fields=shoe_size", []byte(`[]`), 400, "shoe_size"},
		{"number for a string", keyDemo, "", []byte(`[{"email":"a@b.test"},{"email":42}]`), 200, `{},{"error_code":400,"error_msg":"email must be a string, not a number"}]`},
		{"object for a string", keyDemo, "", []byte(`[{"first":{"x":1}}]`), 200, `[{"error_code":400,"error_msg":"first must be a string, not an object"}]`},
		{"boolean for a string", keyDemo, "", []byte(`[{"zip":true},{"zip4":5}]`), 200, `[{"error_code":400,"error_msg":"zip must be a string, not a boolean"},{"error_code":400,"error_msg":"zip4 must be a string, not a number"}]`},
		{"item not an object", keyDemo, "", []byte(`[{"email":"a@b.test"},"a@b.test",null]`), 200, `{},{"error_code":400,"error_msg":"the item must be a JSON object"},{"error_code":400,"error_msg":"the item must be a JSON object"}]`},
		{"trailing garbage", keyDemo, "", []byte(`[{"email":"a@b.test"}] trailing`), 400, "data after the closing ]"},
		{"two arrays", keyDemo, "", []byte(`[][]`), 400, "data after the closing ]"},
		{"missing key", "", "", []byte(`[]`), 401, "missing API key"},
		{"key not enabled", keyAcme, "", []byte(`[]`), 403, "not enabled for demographics"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := bulk(t, tc.key, tc.q, tc.body)
			if r.code != tc.code || !strings.Contains(string(r.body), tc.msg) {
				t.Fatalf("%d %.200s, want %d with %q", r.code, r.body, tc.code, tc.msg)
			}
		})
	}
	t.Run("exactly 5,000 items", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString("[")
		for i := 0; i < 5000; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"email":%q}`, peopleData[i%len(peopleData)].Email)
		}
		b.WriteString("]")
		r := bulk(t, keyDemo, "", b.Bytes())
		var got []map[string]any
		if r.code != 200 || json.Unmarshal(r.body, &got) != nil || len(got) != 5000 || len(got[4999]) == 0 {
			t.Fatalf("%d, %d results", r.code, len(got))
		}
	})
}
