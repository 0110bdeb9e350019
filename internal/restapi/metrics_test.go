package restapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMetricsAndProbes: Prometheus metrics count requests by route pattern
// and code (never by raw path or key), and the probes answer.
func TestMetricsAndProbes(t *testing.T) {
	_ = do(t, newRequest(t, "GET", "/v5/list/424242", keyAcme, nil, ""))
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if r := do(t, newRequest(t, "GET", p, "", nil, "")); r.code != http.StatusOK {
			t.Errorf("%s: %d", p, r.code)
		}
	}
	resp, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, want := range []string{
		`emaildata_api_requests_total{code="404",route="GET /v5/list/{list_id}"}`,
		`emaildata_api_request_duration_seconds_bucket{code="404",route="GET /v5/list/{list_id}"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, leak := range []string{"424242", keyAcme} {
		if strings.Contains(text, leak) {
			t.Errorf("metrics leak %q", leak)
		}
	}
}
