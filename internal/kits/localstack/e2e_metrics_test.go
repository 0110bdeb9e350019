package localstack_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricsBanner is what the local stack's banner says about metrics.
type metricsBanner struct {
	managerURL, tokenFile, apiURL string
}

func (m *metricsBanner) parse(f []string) {
	switch {
	case len(f) >= 3 && f[0] == "manager" && f[1] == "metrics:":
		m.managerURL = f[2]
	case len(f) >= 3 && f[0] == "metrics" && f[1] == "token:":
		m.tokenFile = f[2]
	case len(f) >= 3 && f[0] == "API" && f[1] == "metrics:":
		m.apiURL = f[2]
	}
}

func (m *metricsBanner) complete() bool {
	return m.managerURL != "" && m.tokenFile != "" && m.apiURL != ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrapeMetrics GETs a metrics URL (with token as bearer when set) and
// parses it; code is the HTTP status.
func scrapeMetrics(t *testing.T, u, token string) (int, map[string][]sample) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed certificate
	}}
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	out := map[string][]sample{}
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			s.value = m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out[name] = append(out[name], s)
		}
	}
	return resp.StatusCode, out
}

type sample struct {
	labels map[string]string
	value  float64
}

// sum adds the samples of name whose labels include want.
func sum(fams map[string][]sample, name string, want map[string]string) float64 {
	var total float64
	for _, s := range fams[name] {
		ok := true
		for k, v := range want {
			ok = ok && s.labels[k] == v
		}
		if ok {
			total += s.value
		}
	}
	return total
}

// checkMetrics scrapes the manager's metrics (refused without the
// printed token) and the API's (on its own port, not the public one)
// after lists reached Results, and checks that the new metrics moved.
func checkMetrics(t *testing.T, mm metricsBanner, apiURL, apiKey string) {
	t.Helper()
	// A request no route matches, and a verification, on the public port.
	for _, p := range []string{"/metrics", "/no-such-route", "/v5/ev?api_key=" + url.QueryEscape(apiKey) + "&email=someone%40example.com"} {
		resp, err := http.Get(apiURL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if code, _ := scrapeMetrics(t, mm.managerURL, ""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("manager metrics without a token: %d, want 401 or 403", code)
	}
	token, err := os.ReadFile(mm.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	code, mgr := scrapeMetrics(t, mm.managerURL, strings.TrimSpace(string(token)))
	if code != http.StatusOK {
		t.Fatalf("manager metrics with the printed token: %d", code)
	}
	_, api := scrapeMetrics(t, mm.apiURL, "")
	ev := map[string]string{"service": "email_validation"}
	checks := []struct {
		what  string
		fams  map[string][]sample
		name  string
		label map[string]string
		min   float64
	}{
		{"rows processed", mgr, "emaildata_list_rows_processed_total", ev, 1},
		{"lists in Results", mgr, "emaildata_lists", map[string]string{"phase": "Results"}, 1},
		{"lists in Processed", mgr, "emaildata_lists", map[string]string{"phase": "Processed"}, 0},
		{"list verdicts", mgr, "emaildata_verifications_total", ev, 1},
		{"shards", mgr, "emaildata_list_shards_total", map[string]string{"outcome": "succeeded"}, 1},
		{"time to Results", mgr, "emaildata_list_duration_seconds", map[string]string{"phase": "Results"}, 1},
		{"report list rows", mgr, "emaildata_list_rows_processed_total", map[string]string{"service": "email_intelligence"}, 31},
		{"API list submissions", api, "emaildata_api_requests_total", map[string]string{"route": "POST /v5/list", "code": "202"}, 1},
		{"API unmatched routes", api, "emaildata_api_requests_total", map[string]string{"route": "unmatched", "code": "404"}, 2},
		{"API latency", api, "emaildata_api_request_duration_seconds", map[string]string{"route": "GET /v5/list/{list_id}"}, 1},
		{"API verdicts", api, "emaildata_verifications_total", ev, 1},
	}
	for _, c := range checks {
		if _, ok := c.fams[c.name]; !ok {
			t.Errorf("%s: %s not exported", c.what, c.name)
			continue
		}
		got := sum(c.fams, c.name, c.label)
		t.Logf("%s: %s %v = %v", c.what, c.name, c.label, got)
		if got < c.min {
			t.Errorf("%s: %s%v = %v, want at least %v", c.what, c.name, c.label, got, c.min)
		}
	}
}
