package restapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/emaildata/emaildata/api/kubescheme"
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/platform/apikey"
	"github.com/emaildata/emaildata/internal/platform/services"
	"github.com/emaildata/emaildata/internal/refdata/people"
	"github.com/emaildata/emaildata/internal/wiring"
)

// These tests walk the routes Handler registers, so a route added later
// is held to the same rules without a test of its own: every call on one
// list checks the tenant, then the key's service; every keyed route
// refuses a malformed query string.

const routesNS = "emaildata-system"

// Keys of routesServer: tenant acme has one key per service and one for
// every list service; tenant globex one key for everything.
var routeKeys = map[string]struct{ tenant, services string }{
	"key-ev-000000000000": {"acme", services.EmailValidation},
	"key-ea-000000000000": {"acme", services.EmailAppend},
	"key-ei-000000000000": {"acme", services.EmailIntelligence},
	"key-fraud-000000000": {"acme", services.Fraud},
	"key-demo-0000000000": {"acme", services.Demographics},
	"key-lists-000000000": {"acme", strings.Join(services.List, ",")},
	"key-globex-00000000": {"globex", strings.Join(services.Known, ",")},
}

// routeLists are acme's lists: one per list service, by ID.
var routeLists = map[int64]string{1: services.EmailValidation, 2: services.EmailAppend, 3: services.EmailIntelligence}

// routesServer is a Server with every optional route, on a fake cluster
// holding routeLists, with routeKeys.
func routesServer(t *testing.T) (*Server, http.Handler) {
	t.Helper()
	ctx := context.Background()
	var objs []client.Object
	for id, svc := range routeLists {
		objs = append(objs, builders.MakeEmailList(routesNS, fmt.Sprintf("list-%d", id)).Service(listsv1.Service(svc)).
			Labels(listsv1.ListIDLabel, strconv.FormatInt(id, 10), TenantLabel, tenantLabel("acme"), listsv1.LabelManagedBy, listsv1.ManagedByAPI).Obj())
	}
	c := fake.NewClientBuilder().WithScheme(kubescheme.New()).WithIndex(&listsv1.EmailList{}, ListIDIndex, IndexListID).
		WithIndex(&listsv1.EmailList{}, TenantIndex, IndexTenant).
		WithObjects(objs...).Build()
	keys := apikey.NewStore()
	for key, k := range routeKeys {
		if err := keys.Upsert(apikey.Source{Namespace: routesNS, Name: key}, map[string][]byte{
			"key": []byte(key), "tenant": []byte(k.tenant), "services": []byte(k.services),
		}); err != nil {
			t.Fatal(err)
		}
	}
	store, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ps, err := people.Open(ctx, "bolt://"+filepath.Join(t.TempDir(), "people.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	scorer, err := wiring.NewFraud(ctx, wiring.FraudConfig{HistoryURL: wiring.HistoryMemory, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, ps)
	if err != nil {
		t.Fatal(err)
	}
	// The tests here call every route with every key, hundreds of refusals:
	// budgets past them (the throttles have tests of their own).
	throttle := ThrottleConfig{AuthFailureBurst: 1 << 20, ForbiddenBurst: 1 << 20}
	s := New(Config{Namespace: routesNS, RateLimit: 1e6, Verifier: wiring.OfflineEngine(), People: ps, Fraud: scorer, Throttle: throttle},
		keys, c, nil, store, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return s, s.Handler()
}

type routeAnswer struct {
	code int
	ct   string
	body string
}

func call(h http.Handler, method, target, key string, inQuery bool) routeAnswer {
	if inQuery {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + "api_key=" + key
	}
	req := httptest.NewRequest(method, target, nil)
	if !inQuery {
		req.Header.Set("api_key", key)
	}
	req.Header.Set(RequestIDHeader, "fixed-id") // so answers compare whole
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return routeAnswer{rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()}
}

// listRoutes are the registered routes on one list.
func listRoutes(t *testing.T, s *Server) []string {
	var out []string
	for _, p := range s.routes {
		if strings.Contains(p, "{list_id}") {
			out = append(out, p)
		}
	}
	if len(out) < 3 {
		t.Fatalf("list routes %v: want at least status, results and purchase", out)
	}
	return out
}

// TestEveryListRouteChecksTenantThenService: on every route on one list,
// a key of the list's tenant answers only when enabled for the list's
// service (else 403 naming it, as a submission), and another tenant's key,
// even one enabled for everything, gets exactly an unknown ID's answer.
func TestEveryListRouteChecksTenantThenService(t *testing.T) {
	s, h := routesServer(t)
	for _, pattern := range listRoutes(t, s) {
		method, path, _ := strings.Cut(pattern, " ")
		at := func(id int64) string { return strings.Replace(path, "{list_id}", strconv.FormatInt(id, 10), 1) }
		for id, svc := range routeLists {
			unknown := call(h, method, at(999), "key-lists-000000000", false)
			if unknown.code != http.StatusNotFound {
				t.Fatalf("%s on an unknown id: %d %s", pattern, unknown.code, unknown.body)
			}
			for key, k := range routeKeys {
				got := call(h, method, at(id), key, false)
				name := fmt.Sprintf("%s on a %s list with a key of %s for %s", pattern, svc, k.tenant, k.services)
				switch {
				case k.tenant != "acme":
					other := strings.ReplaceAll(got.body, strconv.FormatInt(id, 10), "N")
					if got.code != unknown.code || got.ct != unknown.ct || other != strings.ReplaceAll(unknown.body, "999", "N") {
						t.Errorf("%s: %d %q, want exactly an unknown id's answer %d %q", name, got.code, got.body, unknown.code, unknown.body)
					}
				case slices.Contains(strings.Split(k.services, ","), svc):
					if got.code == http.StatusForbidden || got.code == http.StatusNotFound && strings.Contains(got.body, "not found") {
						t.Errorf("%s: %d %s; the key is enabled for the list's service", name, got.code, got.body)
					}
				default:
					var e errorBody
					if got.code != http.StatusForbidden || json.Unmarshal([]byte(got.body), &e) != nil ||
						e.Error != "Forbidden" || e.Message != "this API key is not enabled for "+svc {
						t.Errorf("%s: %d %s; want 403 Forbidden naming %s", name, got.code, got.body, svc)
					}
				}
			}
		}
	}
}

// TestEveryKeyedRouteRefusesMalformedQuery: a malformed percent-encoding
// or a semicolon in the query is a 400 saying the query is malformed, in
// the route's own error style (that of its 401), on every route that takes
// a key; never "Missing query parameter(s)" or a silently dropped pair.
func TestEveryKeyedRouteRefusesMalformedQuery(t *testing.T) {
	s, h := routesServer(t)
	unkeyed := []string{"GET /healthz", "GET /readyz", "GET /openapi.json"}
	const key = "key-globex-00000000"
	tested := 0
	for _, pattern := range s.routes {
		if slices.Contains(unkeyed, pattern) {
			continue
		}
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.Replace(path, "{list_id}", "1", 1)
		inQuery := !strings.HasPrefix(path, "/v5/list") // list calls take the key in a header
		style := call(h, method, path+"?email=a%40b.test&phone=14155550100", "not-a-key-at-all-000", inQuery)
		// An unknown key is a 401, except on /feedback/v1, which answers every
		// key problem 400 "Bad request: ..." as the published API does.
		if style.code != http.StatusUnauthorized && !(pattern == "POST /feedback/v1" && style.code == http.StatusBadRequest) {
			t.Fatalf("%s with an unknown key: %d %s", pattern, style.code, style.body)
		}
		for _, q := range []string{"email=%zz", "email=a%40b.test&first=%", "email=a%4", "email=a%40b.test;first=Ann", "%G1=x&email=a%40b.test"} {
			got := call(h, method, path+"?"+q, key, inQuery)
			if got.code != http.StatusBadRequest || got.ct != style.ct || !strings.Contains(strings.ToLower(got.body), "malformed query string") {
				t.Errorf("%s?%s: %d %s %q; want 400 saying the query is malformed, as %s", pattern, q, got.code, got.ct, got.body, style.ct)
			}
		}
		tested++
	}
	if tested < 8 {
		t.Errorf("only %d keyed routes: %v", tested, s.routes)
	}
}

func TestMalformedQueryMessages(t *testing.T) {
	for raw, want := range map[string]string{
		"":                     "",
		"a=1&b=%41%62":         "",
		"email=%zz":            `"%zz" is not a valid percent-encoding`,
		"email=50%":            `"%" is not a valid percent-encoding`,
		"email=%4":             `"%4" is not a valid percent-encoding`,
		"a=1;b=2":              "a semicolon does not separate parameters",
		"td=a?first=%E2%82%AC": "",
	} {
		if got := malformedQuery(raw); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("malformedQuery(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestMalformedQueryAgreesWithParseQuery: FuzzMalformedQuery's property
// over many random queries of the characters that matter, as a plain test
// (fuzzing this package starts its envtest suite in every worker).
func TestMalformedQueryAgreesWithParseQuery(t *testing.T) {
	const alphabet = "%;&=+?aF0z9G "
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 12)
	for i := 0; i < 50000; i++ {
		n := rng.IntN(len(b) + 1)
		for j := range n {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		raw := string(b[:n])
		_, err := url.ParseQuery(raw)
		if got := malformedQuery(raw); (got != "") != (err != nil) {
			t.Fatalf("malformedQuery(%q) = %q, ParseQuery error %v", raw, got, err)
		}
	}
}

// FuzzMalformedQuery: malformedQuery refuses exactly the queries
// url.ParseQuery reports an error for, so no pair is ever dropped silently.
func FuzzMalformedQuery(f *testing.F) {
	for _, seed := range []string{"a=1&b=2", "email=%zz", "x=%", "a;b", "%41=%42", "k=%e2%82%ac&v=%", "=&&=%2"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := url.ParseQuery(raw)
		if got := malformedQuery(raw); (got != "") != (err != nil) {
			t.Errorf("malformedQuery(%q) = %q, ParseQuery error %v", raw, got, err)
		}
	})
}
