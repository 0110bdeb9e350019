// Package sdkcontract lists the HTTP requests the public service's official
// SDKs (python, java, php, php5, csharp, perl, ruby, bash; one public
// repository) make, byte for byte where it matters: method, path, the query
// string as each SDK builds and encodes it (parameter order, its URL
// encoder, what it leaves unencoded), header names and values, and bodies
// as each SDK's JSON encoder writes them. Each call carries a check of what
// the SDK needs from the answer to work: the status it accepts, the shape
// it parses, and the person the call names.
//
// This is our own reading of those SDKs' sources, written as Go; none of
// their code is here. The legacy person API (personalize.rapleaf.com
// /v4/dr, in the repository's history only) is left out.
//
// It serves two tests: the REST API's contract suite (internal/restapi),
// which also validates every answer against openapi.json, and the
// end-to-end test of `make run` (internal/kits/localstack).
package sdkcontract

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/emaildata/emaildata/internal/refdata/people"
)

// Call is one request of an SDK method.
type Call struct {
	SDK    string // python, java, php, php5, csharp, perl, ruby, bash
	Method string // the SDK method and its arguments, for messages
	Verb   string // GET or POST
	// Target is the request target (path and query) exactly as the SDK
	// writes it, sent unchanged.
	Target string
	Header http.Header
	Body   []byte // nil for none
	// Check says whether the SDK works with the answer.
	Check func(code int, header http.Header, body []byte) error
}

// Params are what the calls name.
type Params struct {
	Key string // an API key enabled for every service the SDKs use
	// Person is found by every identifier the SDKs send: email, its
	// hashes, name and postal address, name and zip4 (see Pick).
	Person people.Record
	// Other is a second person for the bulk calls.
	Other people.Record
	// Typo is an address with a mistyped provider domain that the
	// verifier corrects (the ruby SDK reads email_correction).
	Typo string
}

// Pick returns two people of recs that the name and postal matcher finds
// as Individuals both by last name and zip and by last name, city and
// state (no one else of the same name there), with an age and a street.
func Pick(recs []people.Record) (a, b people.Record, ok bool) {
	type key struct{ first, last, place string }
	count := map[key]int{}
	keys := func(r *people.Record) [2]key {
		f, l := people.NormalizeName(r.First), people.NormalizeName(r.Last)
		return [2]key{{f, l, "z" + people.NormalizeZip(r.Zip)}, {f, l, "c" + people.NormalizeName(r.City) + "/" + strings.ToUpper(r.State)}}
	}
	for i := range recs {
		for _, k := range keys(&recs[i]) {
			count[k]++
		}
	}
	var found []people.Record
	for i := range recs {
		r := &recs[i]
		k := keys(r)
		if count[k[0]] == 1 && count[k[1]] == 1 && r.Age != "" && r.Street != "" && people.ValidEmail(r.Email) {
			found = append(found, *r)
			if len(found) == 2 {
				return found[0], found[1], true
			}
		}
	}
	return people.Record{}, people.Record{}, false
}

// Do sends c to baseURL (scheme and host, no path) and returns the answer.
func (c Call) Do(ctx context.Context, client *http.Client, baseURL string) (*http.Response, []byte, error) {
	req, err := c.Request(ctx, baseURL)
	if err != nil {
		return nil, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// Request builds c's request against baseURL.
func (c Call) Request(ctx context.Context, baseURL string) (*http.Request, error) {
	var body io.Reader
	if c.Body != nil {
		body = bytes.NewReader(c.Body)
	}
	req, err := http.NewRequestWithContext(ctx, c.Verb, baseURL+c.Target, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.SDK, c.Method, err)
	}
	for k, v := range c.Header {
		req.Header[k] = slices.Clone(v)
	}
	if c.Body != nil {
		b := c.Body
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return req, nil
}

// Calls returns every SDK call, in SDK order.
func Calls(p Params) []Call {
	var out []Call
	for _, f := range []func(Params) []Call{python, java, php, php5, csharp, perl, ruby, bash} {
		out = append(out, f(p)...)
	}
	return out
}

// ---- what each SDK needs from an answer ----

// jsonObject: a 2xx JSON object on one line (the Java SDK reads the first
// line of the body only).
func jsonObject(code int, body []byte) (map[string]any, error) {
	if code < 200 || code > 299 {
		return nil, fmt.Errorf("status %d: the SDKs raise on anything but 2xx: %.200s", code, body)
	}
	if i := bytes.IndexByte(body, '\n'); i >= 0 && i < len(bytes.TrimRight(body, "\n")) {
		return nil, fmt.Errorf("the JSON spans lines; the Java SDK reads one")
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v: %.200s", err, body)
	}
	return m, nil
}

// demographicsOf expects the person's demographics (an Individual match).
func demographicsOf(r people.Record) func(int, http.Header, []byte) error {
	return func(code int, _ http.Header, body []byte) error {
		m, err := jsonObject(code, body)
		if err != nil {
			return err
		}
		if m["age"] != r.Age || m["match_level"] != "Individual" {
			return fmt.Errorf("not the person's demographics: %.300s", body)
		}
		return nil
	}
}

// onlyFields expects the person's demographics restricted to names.
func onlyFields(r people.Record, names ...string) func(int, http.Header, []byte) error {
	return func(code int, _ http.Header, body []byte) error {
		m, err := jsonObject(code, body)
		if err != nil {
			return err
		}
		for k := range m {
			if !slices.Contains(names, k) {
				return fmt.Errorf("field %q beyond fields=%s: %.300s", k, strings.Join(names, ","), body)
			}
		}
		if m["age"] != r.Age {
			return fmt.Errorf("age %v, want %q", m["age"], r.Age)
		}
		return nil
	}
}

func safeToSend(code int, _ http.Header, body []byte) error {
	m, err := jsonObject(code, body)
	if err != nil {
		return err
	}
	s, _ := m["safe_to_send"].(map[string]any)
	if s == nil || s["status"] == nil || s["status_code"] == nil {
		return fmt.Errorf("no safe_to_send status: %.300s", body)
	}
	return nil
}

// rubyValidation: the ruby SDK's email_validation reads
// result["email_validation"] and assigns each key to an attribute; only
// these exist.
func rubyValidation(okAs func(bool) bool, correction string) func(int, http.Header, []byte) error {
	attrs := []string{"status_code", "status", "ok", "domain_type", "email_correction"}
	return func(code int, _ http.Header, body []byte) error {
		m, err := jsonObject(code, body)
		if err != nil {
			return err
		}
		ev, _ := m["email_validation"].(map[string]any)
		if ev == nil {
			return fmt.Errorf("no email_validation: the SDK raises Unsupported: %.300s", body)
		}
		for k := range ev {
			if !slices.Contains(attrs, k) {
				return fmt.Errorf("email_validation.%s: the SDK has no attribute for it", k)
			}
		}
		ok, isBool := ev["ok"].(bool)
		if !isBool || !okAs(ok) {
			return fmt.Errorf("ok = %v: %.300s", ev["ok"], body)
		}
		if correction != "" && ev["email_correction"] != correction {
			return fmt.Errorf("email_correction %v, want %q", ev["email_correction"], correction)
		}
		return nil
	}
}

// bulkOf expects one answer per item, in order; want[i] is the age of
// item i's person, "" for any answer.
func bulkOf(ages ...string) func(int, http.Header, []byte) error {
	return func(code int, _ http.Header, body []byte) error {
		if code < 200 || code > 299 {
			return fmt.Errorf("status %d: %.200s", code, body)
		}
		var items []map[string]any
		if err := json.Unmarshal(body, &items); err != nil {
			return fmt.Errorf("not a JSON array of objects: %v", err)
		}
		if len(items) != len(ages) {
			return fmt.Errorf("%d answers for %d items (the python SDK pairs them by position)", len(items), len(ages))
		}
		for i, age := range ages {
			if age != "" && items[i]["age"] != age {
				return fmt.Errorf("item %d: %v, want age %q", i, items[i], age)
			}
		}
		return nil
	}
}

// emailAppended expects the published email append shape, the person's
// email first: {"email_append": [{"email", "email_match_type"}, ...]}.
// The SDKs hand the decoded object to their caller, who reads these names.
func emailAppended(r people.Record) func(int, http.Header, []byte) error {
	return func(code int, _ http.Header, body []byte) error {
		m, err := jsonObject(code, body)
		if err != nil {
			return err
		}
		list, _ := m["email_append"].([]any)
		if len(list) == 0 {
			return fmt.Errorf("no email_append list: %.300s", body)
		}
		first, _ := list[0].(map[string]any)
		if first["email"] != r.Email || first["email_match_type"] != "Individual" {
			return fmt.Errorf("email_append[0] = %v, want the person's email as an Individual match: %.300s", first, body)
		}
		return nil
	}
}

// postalAppended expects the published postal append shape:
// {"postal_address": {"first_name", "last_name", "address", "city",
// "state", "zip"}}.
func postalAppended(r people.Record) func(int, http.Header, []byte) error {
	return func(code int, _ http.Header, body []byte) error {
		m, err := jsonObject(code, body)
		if err != nil {
			return err
		}
		a, _ := m["postal_address"].(map[string]any)
		if a == nil || a["first_name"] != r.First || a["last_name"] != r.Last || a["address"] != r.Street ||
			a["city"] != r.City || a["state"] != r.State || a["zip"] != r.Zip {
			return fmt.Errorf("not the person's postal_address: %.300s", body)
		}
		return nil
	}
}

// ---- the URL encoders of the SDKs ----

// escape percent-encodes every byte not kept; space becomes space (or
// %20 when space is ""), hex in upper or lower case.
func escape(s string, keep func(byte) bool, space string, lower bool) string {
	hexd := "0123456789ABCDEF"
	if lower {
		hexd = "0123456789abcdef"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case keep(c):
			b.WriteByte(c)
		case c == ' ' && space != "":
			b.WriteString(space)
		default:
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
	}
	return b.String()
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

func in(set string) func(byte) bool {
	return func(c byte) bool { return alnum(c) || strings.IndexByte(set, c) >= 0 }
}

var (
	// python: urllib quote(s), safe='/': unreserved and '/'.
	pyQuote = func(s string) string { return escape(s, in("_.-~/"), "", false) }
	// java: URLEncoder.encode(s, "UTF-8").
	javaEncode = func(s string) string { return escape(s, in(".-*_"), "+", false) }
	// php: urlencode.
	phpEncode = func(s string) string { return escape(s, in("-_."), "+", false) }
	// C#: HttpUtility.UrlEncode (lower-case hex).
	csEncode = func(s string) string { return escape(s, in("-_.!*()"), "+", true) }
	// perl: URI::Escape uri_escape.
	perlEscape = func(s string) string { return escape(s, in("-_.~"), "", false) }
	// ruby: URI.encode, which leaves reserved characters (@, +, &, =, ...) alone.
	rubyEncode = func(s string) string { return escape(s, in("-_.!~*'();/?:@&=+$,[]"), "", false) }
)

func md5Hex(s string) string  { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }
func sha1Hex(s string) string { h := sha1.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

func zip4(r people.Record) string { return r.Zip + "-0000" }

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = []string{kv[i+1]} // the name as the SDK writes it
	}
	return h
}

// javaDouble writes a float as Java's Double.toString does for ordinary
// values (always a fraction part).
func javaDouble(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
