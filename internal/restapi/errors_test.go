package restapi_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestErrors: every refusal has the right status and a precise message.
func TestErrors(t *testing.T) {
	csv := []byte("a@example.com\n")
	body, ct := multipartFile(t, "l.csv", csv)
	var badZip bytes.Buffer
	zw := zip.NewWriter(&badZip)
	_, _ = zw.Create("../evil.csv")
	_ = zw.Close()

	cases := []struct {
		name    string
		req     func() *http.Request
		code    int
		errCode string
		msg     string
	}{
		{"missing key", func() *http.Request { return newRequest(t, "POST", "/v5/list", "", body, ct) }, 401, "Unauthorized", "missing API key"},
		{"unknown key", func() *http.Request { return newRequest(t, "POST", "/v5/list", "nope-nope-nope-nope", body, ct) }, 401, "Unauthorized", "Invalid API key."},
		{"key not enabled for lists", func() *http.Request { return newRequest(t, "POST", "/v5/list", keyFraud, body, ct) }, 403, "Forbidden", "not enabled for any list service"},
		{"key not enabled for the service", func() *http.Request {
			return newRequest(t, "POST", "/v5/list?service=email_append", keyMulti, body, ct)
		}, 403, "Forbidden", "not enabled for email_append"},
		{"several services, none chosen", func() *http.Request { return newRequest(t, "POST", "/v5/list", keyMulti, body, ct) }, 400, "BadRequest", "email_intelligence, email_validation"},
		{"report with validation", func() *http.Request { return newRequest(t, "POST", "/v5/list?action=report", keyAcme, body, ct) }, 400, "BadRequest", "always runs with action=process"},
		{"bad delimiter", func() *http.Request { return newRequest(t, "POST", "/v5/list?delimiter=%3B", keyAcme, body, ct) }, 400, "BadRequest", "delimiter"},
		{"bad email column", func() *http.Request { return newRequest(t, "POST", "/v5/list?email_column=0", keyAcme, body, ct) }, 400, "BadRequest", "email_column"},
		{"bad header flag", func() *http.Request { return newRequest(t, "POST", "/v5/list?header=maybe", keyAcme, body, ct) }, 400, "BadRequest", "header"},
		{"bad action", func() *http.Request { return newRequest(t, "POST", "/v5/list?action=later", keyAcme, body, ct) }, 400, "BadRequest", "action"},
		{"bad extension", func() *http.Request { return newRequest(t, "POST", "/v5/list?name=list.exe", keyAcme, body, ct) }, 400, "BadRequest", "must end in .txt, .csv or .zip"},
		{"path in name", func() *http.Request { return newRequest(t, "POST", "/v5/list?name=..%2Fx.csv", keyAcme, body, ct) }, 400, "BadRequest", "plain file name"},
		// "list\u202Evsc.csv" shows as "listvsc.csv" reversed: a disguise.
		{"right-to-left override in name", func() *http.Request {
			return newRequest(t, "POST", "/v5/list?name=list%E2%80%AEvsc.csv", keyAcme, body, ct)
		}, 400, "BadRequest", `name "list\u202evsc.csv" contains the bidirectional control character U+202E RIGHT-TO-LEFT OVERRIDE at character 5`},
		{"right-to-left override in the file's own name", func() *http.Request {
			b, c := multipartFile(t, "invoice\u202Ecod.zip", csv)
			return newRequest(t, "POST", "/v5/list", keyAcme, b, c)
		}, 400, "BadRequest", `the uploaded file's name "invoice\u202ecod.zip" contains the bidirectional control character U+202E`},
		{"C1 control in the file's own name", func() *http.Request {
			b, c := multipartFile(t, "a\u0085b.csv", csv)
			return newRequest(t, "POST", "/v5/list", keyAcme, b, c)
		}, 400, "BadRequest", "contains the control character U+0085 at character 2"},
		{"isolate in name", func() *http.Request { return newRequest(t, "POST", "/v5/list?name=a%E2%81%A6.csv", keyAcme, body, ct) }, 400, "BadRequest", "U+2066 LEFT-TO-RIGHT ISOLATE"},
		{"callback to loopback", func() *http.Request {
			return newRequest(t, "POST", "/v5/list?callback_url=http%3A%2F%2F169.254.169.254%2F", keyAcme, body, ct)
		}, 400, "BadRequest", "callback_url must not point at"},
		{"callback scheme", func() *http.Request {
			return newRequest(t, "POST", "/v5/list?callback_url=ftp%3A%2F%2Fx.example", keyAcme, body, ct)
		}, 400, "BadRequest", "http or https"},
		{"callback too long", func() *http.Request {
			return newRequest(t, "POST", "/v5/list?callback_url=https%3A%2F%2Fexample.com%2F"+strings.Repeat("a", 520), keyAcme, body, ct)
		}, 400, "BadRequest", "512"},
		{"no file part", func() *http.Request {
			b, c := multipartFieldOnly(t)
			return newRequest(t, "POST", "/v5/list", keyAcme, b, c)
		}, 400, "BadRequest", `no part named "file"`},
		{"unsupported content type", func() *http.Request { return newRequest(t, "POST", "/v5/list", keyAcme, csv, "application/json") }, 415, "UnsupportedMediaType", "not supported"},
		{"empty file", func() *http.Request {
			b, c := multipartFile(t, "l.csv", nil)
			return newRequest(t, "POST", "/v5/list", keyAcme, b, c)
		}, 400, "EmptyFile", "empty"},
		{"too large", func() *http.Request {
			b, c := multipartFile(t, "l.csv", bytes.Repeat([]byte("a@example.com\n"), maxUpload/10))
			return newRequest(t, "POST", "/v5/list", keyAcme, b, c)
		}, 413, "FileTooLarge", "larger than"},
		{"bad zip", func() *http.Request {
			b, c := multipartFile(t, "l.zip", badZip.Bytes())
			return newRequest(t, "POST", "/v5/list?name=l.zip", keyAcme, b, c)
		}, 400, "BadZip", "evil.csv"},
		{"unparsable id", func() *http.Request { return newRequest(t, "GET", "/v5/list/abc", keyAcme, nil, "") }, 400, "BadRequest", "not a positive integer"},
		{"unknown results", func() *http.Request { return newRequest(t, "GET", "/v5/list/999999/results", keyAcme, nil, "") }, 404, "FileNotFound", "999999"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, tc.req())
			if r.code != tc.code {
				t.Fatalf("status %d, want %d: %s", r.code, tc.code, r.body)
			}
			m := r.json(t)
			if tc.code != 415 && m["error"] != tc.errCode {
				t.Errorf("error %v, want %s", m["error"], tc.errCode)
			}
			if msg, _ := m["message"].(string); !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q, want it to contain %q", msg, tc.msg)
			}
			if strings.Contains(string(r.body), "goroutine") || strings.Contains(string(r.body), ".go:") {
				t.Errorf("body leaks internals: %s", r.body)
			}
		})
	}
}

func multipartFieldOnly(t *testing.T) ([]byte, string) {
	t.Helper()
	b, c := multipartFile(t, "x.csv", []byte("x"))
	return bytes.Replace(b, []byte(`name="file"`), []byte(`name="other"`), 1), c
}

// TestWrongMethod: a known path with another method gets 405.
func TestWrongMethod(t *testing.T) {
	for _, tc := range []struct{ method, path string }{
		{"DELETE", "/v5/list/1"}, {"GET", "/v5/list/1/purchase"}, {"PUT", "/v5/list"}, {"POST", "/v5/list/1/results"},
	} {
		r := do(t, newRequest(t, tc.method, tc.path, keyAcme, nil, ""))
		if r.code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 405", tc.method, tc.path, r.code)
		}
	}
}

// TestTenantIsolation: another tenant's list is indistinguishable from a
// missing one, on every endpoint.
func TestTenantIsolation(t *testing.T) {
	id := listID(t, submit(t, keyAcme, nil, "mine.csv", []byte("a@example.com\n")))
	waitStatus(t, keyAcme, id, "Results")
	for _, tc := range []struct{ method, path, errCode string }{
		{"GET", "/v5/list/%d", ""}, // "": the plain-text List not found: N
		{"GET", "/v5/list/%d/results", "FileNotFound"},
		{"POST", "/v5/list/%d/purchase", ""},
	} {
		r := do(t, newRequest(t, tc.method, fmt.Sprintf(tc.path, id), keyGlobex, nil, ""))
		if tc.errCode == "" {
			if r.code != http.StatusNotFound || string(r.body) != fmt.Sprintf("List not found: %d\n", id) {
				t.Errorf("%s %s as another tenant: %d %s", tc.method, tc.path, r.code, r.body)
			}
			continue
		}
		if r.code != http.StatusNotFound || r.json(t)["error"] != tc.errCode {
			t.Errorf("%s %s as another tenant: %d %s", tc.method, tc.path, r.code, r.body)
		}
	}
	// Two keys of one tenant share its lists.
	if r := do(t, newRequest(t, "GET", fmt.Sprintf("/v5/list/%d", id), keyMulti, nil, "")); r.code != http.StatusOK {
		t.Errorf("same tenant, other key: %d", r.code)
	}
}

// TestPurchaseRefusals and results that are not ready.
func TestPurchaseRefusals(t *testing.T) {
	id := listID(t, submit(t, keyAcme, nil, "ev.csv", []byte("a@example.com\n")))
	waitStatus(t, keyAcme, id, "Results")
	r := do(t, newRequest(t, "POST", fmt.Sprintf("/v5/list/%d/purchase", id), keyAcme, nil, ""))
	if r.code != http.StatusBadRequest || r.json(t)["error"] != "NotPurchasable" {
		t.Errorf("purchase of a validation list: %d %s", r.code, r.body)
	}
	r = do(t, newRequest(t, "POST", fmt.Sprintf("/v5/list/%d/purchase", id), keyAcme, []byte(`{"fields": [`), "application/json"))
	if r.code != http.StatusBadRequest {
		t.Errorf("malformed purchase body: %d %s", r.code, r.body)
	}
}

// TestRateLimit: a key over its rate gets 429 with Retry-After.
func TestRateLimit(t *testing.T) {
	var limited response
	for i := 0; i < 10; i++ {
		limited = do(t, newRequest(t, "GET", "/v5/list/1", keyLimited, nil, ""))
		if limited.code == http.StatusTooManyRequests {
			break
		}
	}
	if limited.code != http.StatusTooManyRequests || limited.header.Get("Retry-After") == "" {
		t.Fatalf("no 429 with Retry-After after 10 quick requests at 1/s: %d %v", limited.code, limited.header)
	}
	// Other keys are unaffected.
	if r := do(t, newRequest(t, "GET", "/v5/list/1", keyGlobex, nil, "")); r.code == http.StatusTooManyRequests {
		t.Errorf("another key was limited too")
	}
}
