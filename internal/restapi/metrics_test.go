package restapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads the API's metrics from its own metrics port.
func scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(metricsURL(t, baseURL) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d %s", resp.StatusCode, body)
	}
	return string(body)
}

// sample is the value of the series name{labels} in a scrape, 0 if absent.
func sample(t *testing.T, text, name string, labels map[string]string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		match := 0
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				match++
			}
		}
		if match == len(labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return sum
}

// TestMetricsAndProbes: Prometheus metrics count requests by route pattern
// and code (never by raw path or key), on the metrics port only, and the
// probes answer.
func TestMetricsAndProbes(t *testing.T) {
	_ = do(t, newRequest(t, "GET", "/v5/list/424242", keyAcme, nil, ""))
	for _, p := range []string{"/healthz", "/readyz", "/openapi.json"} {
		if r := do(t, newRequest(t, "GET", p, "", nil, "")); r.code != http.StatusOK {
			t.Errorf("%s: %d", p, r.code)
		}
	}
	text := scrape(t)
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

// TestMetricsNotOnPublicPort: the public port answers GET /metrics with
// 404, counted as an unmatched route.
func TestMetricsNotOnPublicPort(t *testing.T) {
	unmatched := map[string]string{"route": "unmatched", "code": "404"}
	before := sample(t, scrape(t), "emaildata_api_requests_total", unmatched)
	resp, err := http.Get(baseURL + "/metrics") // not in openapi.json: not through do
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "emaildata_") {
		t.Fatalf("public GET /metrics: %d %.100s, want 404", resp.StatusCode, body)
	}
	if after := sample(t, scrape(t), "emaildata_api_requests_total", unmatched); after != before+1 {
		t.Errorf("unmatched 404s went from %v to %v, want one more", before, after)
	}
}

// TestMetricsVerdictsAndEngine: GET /v5/ev counts its verdict by status
// code and exports the verifier's DNS counters.
func TestMetricsVerdictsAndEngine(t *testing.T) {
	cases := []struct {
		email string
		code  int
	}{
		{"john@good.test", 20},
		{"x@gone.test", 310},
	}
	for _, c := range cases {
		text := scrape(t)
		labels := map[string]string{"service": "email_validation", "status_code": strconv.Itoa(c.code)}
		before := sample(t, text, "emaildata_verifications_total", labels)
		lookups := sample(t, text, "emaildata_dns_lookups_total", nil)
		if r := ev(t, q("api_key", keyAcme, "email", c.email)); r.code != http.StatusOK || !strings.Contains(string(r.body), `"status_code":`+strconv.Itoa(c.code)) {
			t.Fatalf("%s: %d %s", c.email, r.code, r.body)
		}
		text = scrape(t)
		if after := sample(t, text, "emaildata_verifications_total", labels); after != before+1 {
			t.Errorf("%s: verdicts %v went to %v, want one more", c.email, before, after)
		}
		if after := sample(t, text, "emaildata_dns_lookups_total", nil); after <= lookups {
			t.Errorf("%s: DNS lookups %v did not grow (%v)", c.email, lookups, after)
		}
		if strings.Contains(text, c.email) {
			t.Errorf("metrics leak %s", c.email)
		}
	}
}
