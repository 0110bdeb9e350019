package restapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/platform/apikey"
)

// settled polls a list's status until it leaves Pending and Processing.
func settled(t *testing.T, key string, id int64) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("/v5/list/%d", id), key, nil, ""))
		if r.code != http.StatusOK {
			t.Fatalf("status of list %d: %d %s", id, r.code, r.body)
		}
		if st := r.json(t)["status"].(string); st != "Pending" && st != "Processing" {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("list %d did not settle", id)
	return ""
}

// TestListCallsNeedTheListService (F1): each list call × a list of each
// list service × keys of the list's tenant enabled for other services
// (fraud only, demographics only, another list service) gets 403 naming
// the list's service, as a submission would; keys enabled for it get the
// list; keys of other tenants, even enabled for the service or for
// everything, get exactly an unknown ID's answer.
func TestListCallsNeedTheListService(t *testing.T) {
	csv := []byte("a@example.com\nb@example.org\n")
	lists := map[string]int64{ // service: a list of tenant acme
		"email_validation":   listID(t, submit(t, keyAcme, nil, "ev.csv", csv)),
		"email_intelligence": listID(t, submit(t, keyMulti, q("service", "email_intelligence"), "ei.csv", csv)),
		"email_append":       listID(t, submit(t, keyAppend, nil, "ea.csv", csv)),
	}
	owners := map[string]string{"email_validation": keyAcme, "email_intelligence": keyMulti, "email_append": keyAppend}
	for svc, id := range lists {
		t.Logf("%s list %d: %s", svc, id, settled(t, owners[svc], id))
	}
	acmeKeys := map[string][]string{ // key of tenant acme: its services
		keyAcme: {"email_validation"}, keyMulti: {"email_validation", "email_intelligence"},
		keyAppend: {"email_append"}, keyFraud: {"fraud"}, keyDemo: {"demographics"},
	}
	otherTenants := []string{keyGlobex, keyReporter, keyAll} // validation, intelligence, everything
	calls := []struct{ method, path string }{
		{http.MethodGet, "/v5/list/%d"}, {http.MethodGet, "/v5/list/%d/results"}, {http.MethodPost, "/v5/list/%d/purchase"},
	}
	for _, c := range calls {
		unknown := do(t, newRequest(t, c.method, fmt.Sprintf(c.path, 99999999), keyAcme, nil, ""))
		for svc, id := range lists {
			for key, enabled := range acmeKeys {
				name := fmt.Sprintf("%s %s on the %s list with a key for %v", c.method, c.path, svc, enabled)
				r := do(t, newRequest(t, c.method, fmt.Sprintf(c.path, id), key, nil, ""))
				if slices.Contains(enabled, svc) {
					if r.code == http.StatusForbidden || bytes.Contains(r.body, []byte(fmt.Sprintf("not found: %d", id))) ||
						bytes.Contains(r.body, []byte(fmt.Sprintf("no result file for list %d", id))) {
						t.Errorf("%s: %d %s; the key is enabled for %s", name, r.code, r.body, svc)
					}
					if c.path == "/v5/list/%d" && (r.code != http.StatusOK || r.json(t)["list_id"] != float64(id)) {
						t.Errorf("%s: %d %s", name, r.code, r.body)
					}
					continue
				}
				if r.code != http.StatusForbidden || r.json(t)["error"] != "Forbidden" || r.json(t)["message"] != "this API key is not enabled for "+svc {
					t.Errorf("%s: %d %s; want 403 Forbidden naming %s", name, r.code, r.body, svc)
				}
			}
			for _, key := range otherTenants {
				r := do(t, newRequest(t, c.method, fmt.Sprintf(c.path, id), key, nil, ""))
				got := strings.ReplaceAll(stripRequestID(r.body), fmt.Sprint(id), "N")
				want := strings.ReplaceAll(stripRequestID(unknown.body), "99999999", "N")
				if r.code != unknown.code || got != want {
					t.Errorf("%s %s on another tenant's %s list: %d %s; want an unknown id's %d %s", c.method, c.path, svc, r.code, r.body, unknown.code, unknown.body)
				}
			}
		}
	}
}

func stripRequestID(body []byte) string {
	s := string(body)
	if i := strings.Index(s, `,"request_id":"`); i >= 0 {
		if j := strings.Index(s[i+15:], `"`); j >= 0 {
			return s[:i] + s[i+15+j+1:]
		}
	}
	return s
}

// TestSecondFilePart: one list per submission; a second part named file
// is a 400 that says so and creates no list. Other form fields beside the
// file are fine, but not megabytes of them.
func TestSecondFilePart(t *testing.T) {
	build := func(parts ...[2]string) ([]byte, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for _, p := range parts {
			var w interface{ Write([]byte) (int, error) }
			var err error
			if p[0] == "file" {
				w, err = mw.CreateFormFile("file", "l.csv")
			} else {
				w, err = mw.CreateFormField(p[0])
			}
			if err != nil {
				t.Fatal(err)
			}
			_, _ = w.Write([]byte(p[1]))
		}
		_ = mw.Close()
		return b.Bytes(), mw.FormDataContentType()
	}
	before := countLists(t)
	for _, tc := range []struct {
		name  string
		parts [][2]string
		code  int
		msg   string
	}{
		{"two file parts", [][2]string{{"file", "a@example.com\n"}, {"file", "b@example.com\n"}}, 400, `more than one part named "file"`},
		{"two file parts with a field between", [][2]string{{"file", "a@example.com\n"}, {"note", "x"}, {"file", "b@example.com\n"}}, 400, `more than one part named "file"`},
		{"fields larger than the file limit and a megabyte", [][2]string{{"note", strings.Repeat("x", maxUpload+1<<20)}, {"file", "a@example.com\n"}}, 413, "for the other parts and headers"},
	} {
		body, ct := build(tc.parts...)
		r := do(t, newRequest(t, http.MethodPost, "/v5/list", keyAcme, body, ct))
		if r.code != tc.code || !strings.Contains(r.json(t)["message"].(string), tc.msg) {
			t.Errorf("%s: %d %s; want %d mentioning %q", tc.name, r.code, r.body, tc.code, tc.msg)
		}
	}
	if n := countLists(t); n != before {
		t.Errorf("%d lists after refused submissions, %d before", n, before)
	}
	// Fields before and after one file part are fine.
	body, ct := build([2]string{"note", "x"}, [2]string{"file", "a@example.com\n"}, [2]string{"other", "y"})
	listID(t, do(t, newRequest(t, http.MethodPost, "/v5/list", keyAcme, body, ct)))
}

func countLists(t *testing.T) int {
	t.Helper()
	var l listsv1.EmailListList
	if err := k8s.List(context.Background(), &l, client.InNamespace(nsSystem)); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestMalformedQuery: a broken percent-encoding is a 400 that says the
// query is malformed, in each endpoint family's error style, before the
// key is even looked at (a dropped api_key pair would otherwise read as a
// missing key). routes_internal_test.go holds every route to it.
func TestMalformedQuery(t *testing.T) {
	r := do(t, newRequest(t, http.MethodGet, "/v5/ev?api_key="+keyAcme+"&email=%zz", "", nil, ""))
	if r.code != 400 || !strings.HasPrefix(string(r.body), `Malformed query string: "%zz" is not a valid percent-encoding`) {
		t.Errorf("GET /v5/ev?email=%%zz: %d %q", r.code, r.body)
	}
	r = do(t, newRequest(t, http.MethodGet, "/v5/ev?email=a%40good.test&api_key=%zz"+keyAcme, "", nil, ""))
	if r.code != 400 || !strings.Contains(string(r.body), "Malformed query string") {
		t.Errorf("GET /v5/ev with a broken key pair: %d %q", r.code, r.body)
	}
	for _, path := range []string{"/v5/list/1?x=%zz", "/v5/list/1/results?x=%2", "/v5/list?name=a%zz.csv"} {
		method := http.MethodGet
		var body []byte
		ct := ""
		if path == "/v5/list?name=a%zz.csv" {
			method = http.MethodPost
			body, ct = multipartFile(t, "l.csv", []byte("a@example.com\n"))
		}
		r := do(t, newRequest(t, method, path, keyAcme, body, ct))
		if r.code != 400 || r.json(t)["error"] != "BadRequest" || !strings.HasPrefix(r.json(t)["message"].(string), "malformed query string:") {
			t.Errorf("%s %s: %d %s", method, path, r.code, r.body)
		}
	}
}

// TestClashingKeySecrets: two key Secrets with one key string and
// different tenants: the key is refused for both, and works again for the
// remaining tenant once one goes.
func TestClashingKeySecrets(t *testing.T) {
	t.Parallel() // a key of its own; its time is the informer's and the 2 s check
	ctx := context.Background()
	const key = "clashing-key-0000000000001"
	mk := func(name, tenant string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsSystem, Name: name, Labels: map[string]string{apikey.Label: "true"}},
			StringData: map[string]string{"key": key, "services": "email_validation", "tenant": tenant},
		}
	}
	status := func() int {
		code, err := httpGet(baseURL+"/v5/list/1", key)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	waitFor := func(what string, ok func(int) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(status()); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %d after 10s", what, status())
			}
		}
	}
	a, b := mk("clash-a", "tenant-a"), mk("clash-b", "tenant-b")
	if err := k8s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, a) }()
	waitFor("tenant-a's key", func(c int) bool { return c == http.StatusNotFound }) // list 1 is another tenant's
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor("the clashing key refused", func(c int) bool { return c == http.StatusUnauthorized })
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c := status(); c != http.StatusUnauthorized {
			t.Fatalf("a key two tenants' Secrets hold answered %d; want 401", c)
		}
	}
	if err := k8s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor("tenant-b's key once clash-a went", func(c int) bool { return c == http.StatusNotFound })
	id := listID(t, submit(t, key, nil, "c.csv", []byte("a@example.com\n")))
	var l listsv1.EmailList
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: nsSystem, Name: fmt.Sprintf("list-%d", id)}, &l); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("tenant:tenant-b"))
	if got := l.Labels[listsv1.LabelTenant]; got != hex.EncodeToString(sum[:16]) {
		t.Errorf("the list's tenant label %q, want tenant-b's", got)
	}
	_ = k8s.Delete(ctx, b)
}
