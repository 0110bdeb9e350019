package metrics

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/emaildata/emaildata/internal/engine/evhistory"
	"github.com/emaildata/emaildata/internal/engine/fleet"
	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/platform/durhist"
)

// allEngine gives every exported engine counter a value.
func allEngine() map[string]float64 {
	out := map[string]float64{}
	for _, k := range EngineCounterKeys() {
		out[k] = 1
	}
	h := durhist.New(0.01, 1)
	h.Observe(5 * time.Millisecond)
	for _, k := range EngineHistogramKeys() {
		h.Snapshot().AddCounters(out, k)
	}
	return out
}

// touchManager gives every manager family a sample.
func touchManager(m *Manager) {
	m.SetListPhases(func() map[string]float64 { return map[string]float64{"Results": 1} })
	m.ListFinished(ListOutcome{Service: "email_validation", Phase: "Failed", Reason: "InvalidInput", Seconds: 2,
		ShardsSucceeded: 1, ShardsFailed: 1, Rows: 3, StatusCodes: map[string]int64{"50": 3}, Engine: allEngine()})
	m.CallbackAttempt(CallbackDelivered)
	m.UploadSweep(SweepSucceeded, 1, 1, 100)
}

// touchAPI gives every API family a sample.
func touchAPI(a *API) {
	a.Request(RouteUnmatched, 429, time.Millisecond)
	a.Verdict("email_validation", 50)
	a.SetEngine(allEngine)
}

func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), Prefix) {
			out[mf.GetName()] = mf
		}
	}
	return out
}

// TestNamesMatchRegistries checks that Names lists exactly what the
// manager's and the API's collectors export, with the declared types and
// exporters: dashboards and alerts are checked against Names.
func TestNamesMatchRegistries(t *testing.T) {
	m := NewManager()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	touchManager(m)
	a := NewAPI()
	touchAPI(a)
	byExporter := map[string]map[string]*dto.MetricFamily{manager: gather(t, reg), api: gather(t, a.Registry())}

	seen := map[string]bool{}
	for _, f := range Families() {
		for _, exp := range f.Exporters {
			mf, ok := byExporter[exp][f.Name]
			if !ok {
				t.Errorf("%s: declared for the %s but not exported there", f.Name, exp)
				continue
			}
			if got := strings.ToLower(mf.GetType().String()); got != string(f.Type) {
				t.Errorf("%s: type %s, declared %s", f.Name, got, f.Type)
			}
			seen[exp+" "+f.Name] = true
		}
	}
	for exp, fams := range byExporter {
		for name := range fams {
			if !seen[exp+" "+name] {
				t.Errorf("the %s exports %s, which Families does not declare for it", exp, name)
			}
		}
	}
	if names := Names(); !sort.StringsAreSorted(names) || len(names) != len(Families()) {
		t.Errorf("Names() = %v: not sorted or not one per family", names)
	}
}

// TestEngineKeys checks that every counter the engines report is
// exported, and nothing else is listed as an engine counter.
func TestEngineKeys(t *testing.T) {
	keys := slices.Collect(maps.Keys(mxdns.Stats{}.Counters()))
	keys = append(keys, slices.Collect(maps.Keys(smtpprobe.Stats{}.Counters()))...)
	keys = append(keys, slices.Collect(maps.Keys(evhistory.Stats{}.Counters()))...)
	keys = append(keys, slices.Collect(maps.Keys(fleet.Stats{}.Counters()))...)
	slices.Sort(keys)
	exported := EngineCounterKeys()
	slices.Sort(exported)
	if !slices.Equal(keys, exported) {
		t.Errorf("engine counter keys %v, exported %v", keys, exported)
	}
}

func TestKnown(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"emaildata_lists", true},
		{"emaildata_list_duration_seconds_bucket", true},
		{"emaildata_api_request_duration_seconds_count", true},
		{"emaildata_api_requests_total", true},
		{"emaildata_smtp_deferred_total", true},
		{"emaildata_dns_resolution_seconds_total", true},
		{"emaildata_api_requests_total_bucket", false},
		{"emaildata_lists_total", false},
		{"controller_runtime_reconcile_total", false},
	}
	for _, tt := range tests {
		if got := Known(tt.name); got != tt.want {
			t.Errorf("Known(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func labelValues(mf *dto.MetricFamily, label string) []string {
	var out []string
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out = append(out, l.GetValue())
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestLabelsStayLowCardinality checks that values that are not codes or
// names (addresses, paths) never become label values.
func TestLabelsStayLowCardinality(t *testing.T) {
	m := NewManager()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	m.ListFinished(ListOutcome{Service: "jane.doe@example.com", Phase: "Results",
		StatusCodes: map[string]int64{"50": 1, "someone@example.com": 2}, Engine: map[string]float64{"bogus": 5, "dns_lookups": -1}})
	m.SetListPhases(func() map[string]float64 { return map[string]float64{"Results": 2, "a b/c": 1} })
	fams := gather(t, reg)
	tests := []struct {
		family, label string
		want          []string
	}{
		{ListRowsProcessed, "service", []string{"other"}},
		{Verifications, "status_code", []string{"50"}},
		{Lists, "phase", []string{"Results"}},
	}
	for _, tt := range tests {
		mf, ok := fams[tt.family]
		if !ok {
			t.Errorf("%s not exported", tt.family)
			continue
		}
		if got := labelValues(mf, tt.label); !slices.Equal(got, tt.want) {
			t.Errorf("%s{%s} = %v, want %v", tt.family, tt.label, got, tt.want)
		}
	}
	if v := fams[EngineCounterName("dns_lookups")].GetMetric()[0].GetCounter().GetValue(); v != 0 {
		t.Errorf("a negative engine counter was added: %v", v)
	}
}

// TestRequestCountsRateLimited checks that 429s are counted twice: as a
// request and as rate limited, under the route.
func TestRequestCountsRateLimited(t *testing.T) {
	a := NewAPI()
	a.Request("GET /v5/ev", 200, time.Millisecond)
	a.Request("GET /v5/ev", 429, time.Millisecond)
	a.Request("POST /v5/list", 429, time.Millisecond)
	fams := gather(t, a.Registry())
	if got := labelValues(fams[APIRateLimited], "route"); !slices.Equal(got, []string{"GET /v5/ev", "POST /v5/list"}) {
		t.Errorf("rate limited routes %v", got)
	}
	if got := labelValues(fams[APIRequests], "code"); !slices.Equal(got, []string{"200", "429", "429"}) {
		t.Errorf("request codes %v", got)
	}
}
