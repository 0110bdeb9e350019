package restapi

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// handlerRoutes are the routes Server.Handler registers (server.go). Keep
// the two in step: TestOpenAPIDocRoutes checks the document against it.
var handlerRoutes = []struct {
	method, path string
	optional     bool // need not be documented
}{
	{method: http.MethodGet, path: "/healthz"},
	{method: http.MethodGet, path: "/readyz"},
	{method: http.MethodGet, path: "/openapi.json"},
	{method: http.MethodPost, path: "/v5/list"},
	{method: http.MethodGet, path: "/v5/list/{list_id}"},
	{method: http.MethodPost, path: "/v5/list/{list_id}/purchase"},
	{method: http.MethodGet, path: "/v5/list/{list_id}/results"},
	{method: http.MethodGet, path: "/v5/callback/secret"},
	{method: http.MethodGet, path: "/v5/lists"},
	{method: http.MethodGet, path: "/v5/key"},
	{method: http.MethodGet, path: "/v5/ev"},       // routed when a Verifier is configured
	{method: http.MethodGet, path: "/fr"},          // routed when a fraud Scorer is configured too
	{method: http.MethodPost, path: "/v5/ei/bulk"}, // routed when a people store is configured
	{method: http.MethodGet, path: "/v5/td"},       // routed when a people store is configured
	{method: http.MethodGet, path: "/v5/eppend"},   // routed when a people store is configured
	{method: http.MethodGet, path: "/ae"},          // routed when a people store is configured
	{method: http.MethodGet, path: "/pv"},
	{method: http.MethodPost, path: "/feedback/v1"},           // routed when a fraud Scorer is configured
	{method: http.MethodGet, path: "/feedback/v1/reports"},    // routed when a fraud Scorer is configured
	{method: http.MethodDelete, path: "/feedback/v1/reports"}, // routed when a fraud Scorer is configured
}

func loadOpenAPIDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is invalid: %v", err)
	}
	return doc
}

func TestOpenAPIDocValid(t *testing.T) {
	doc := loadOpenAPIDoc(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	if doc.Info == nil || doc.Info.Title != "emaildata API" || doc.Info.Version != "v5" {
		t.Errorf("info = %+v, want title emaildata API, version v5", doc.Info)
	}
	if doc.Components == nil || doc.Components.SecuritySchemes["apiKeyHeader"] == nil {
		t.Fatal("components.securitySchemes.apiKeyHeader is missing")
	}
	if s := doc.Components.SecuritySchemes["apiKeyHeader"].Value; s.Type != "apiKey" || s.In != "header" || s.Name != "api_key" {
		t.Errorf("apiKeyHeader = %+v, want apiKey in header api_key", s)
	}
	if doc.Components.Headers["XRequestId"] == nil {
		t.Error("components.headers.XRequestId is missing")
	}
}

func TestOpenAPIDocRoutes(t *testing.T) {
	doc := loadOpenAPIDoc(t)

	known := map[string]bool{}
	for _, r := range handlerRoutes {
		key := r.method + " " + r.path
		known[key] = true
		if r.optional {
			continue
		}
		item := doc.Paths.Value(r.path)
		if item == nil || item.GetOperation(r.method) == nil {
			t.Errorf("route %s is not documented in openapi.json", key)
		}
	}

	var documented []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := strings.ToUpper(method) + " " + path
			documented = append(documented, key)
			if !known[key] {
				t.Errorf("openapi.json documents %s, which Handler does not serve", key)
			}
			// Every response carries X-Request-Id.
			for code, resp := range op.Responses.Map() {
				if resp.Value == nil || resp.Value.Headers["X-Request-Id"] == nil {
					t.Errorf("%s -> %s does not declare the X-Request-Id header", key, code)
				}
			}
		}
	}
	sort.Strings(documented)
	if len(documented) == 0 {
		t.Fatal("openapi.json documents no operations")
	}
	t.Logf("documented operations: %s", strings.Join(documented, ", "))
}
