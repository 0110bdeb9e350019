package controllers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/controllers"
	"github.com/emaildata/emaildata/internal/kits/testkit/builders"
	"github.com/emaildata/emaildata/internal/platform/metrics"
)

// managerSample sums the manager's series name{labels} (counters, gauges,
// and histogram counts).
func managerSample(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(labels)
}

// TestListMetrics: a list that reaches Results adds its rows, shards,
// verdicts and duration to the manager's metrics, through the Job executor
// (workers' shard summaries) and the local one alike. Other tests run
// lists at the same time, so the deltas are lower bounds. (The Lists gauge
// reads the last manager's cache, and this suite runs several managers:
// the e2e test checks it, with make run's one manager.)
func TestListMetrics(t *testing.T) {
	ev := map[string]string{"service": "email_validation"}
	series := []struct {
		name   string
		labels map[string]string
		min    float64 // the least this list adds
	}{
		{metrics.ListRowsProcessed, ev, 4},
		{metrics.ListShards, map[string]string{"service": "email_validation", "outcome": metrics.ShardSucceeded}, 1},
		{metrics.Verifications, map[string]string{"service": "email_validation", "status_code": "10"}, 2},
		{metrics.Verifications, map[string]string{"service": "email_validation", "status_code": "115"}, 1},
		{metrics.ListDuration, map[string]string{"service": "email_validation", "phase": "Results"}, 1},
		{metrics.EngineCounterName("dns_lookups"), nil, 0},
	}
	for _, tc := range []struct{ name, ns string }{{"job executor", nsJob}, {"local executor", nsLocal}} {
		t.Run(tc.name, func(t *testing.T) {
			before := make([]float64, len(series))
			for i, s := range series {
				before[i] = managerSample(t, s.name, s.labels)
			}
			name := uniqueName("metrics")
			createConfigMap(t, tc.ns, name, "list.csv", sampleCSV)
			create(t, builders.MakeEmailList(tc.ns, name).ConfigMap(name, "list.csv").Header().EmailColumn(3).Obj())
			waitPhase(t, tc.ns, name, listsv1.PhaseResults)
			// The manager adds a list's totals just after its status patch
			// lands, so the test may see Results a moment before.
			for i, s := range series {
				eventually(t, 10*time.Second, s.name+" to grow", func() (bool, string) {
					got := managerSample(t, s.name, s.labels) - before[i]
					return got >= s.min, fmt.Sprintf("%s%v grew by %v, want at least %v", s.name, s.labels, got, s.min)
				})
			}
		})
	}
}

// TestFailureAndCallbackMetrics: a failed list counts under its reason and
// the Failed duration; callback attempts count by outcome.
func TestFailureAndCallbackMetrics(t *testing.T) {
	failed := map[string]string{"service": "email_validation", "reason": controllers.ReasonInvalidInput}
	failedDuration := map[string]string{"service": "email_validation", "phase": "Failed"}
	before := []float64{managerSample(t, metrics.ListsFailed, failed), managerSample(t, metrics.ListDuration, failedDuration)}
	name := uniqueName("metrics-bad")
	create(t, builders.MakeEmailList(nsLocal, name).APIUpload(putUpload(t, nil), testTenant).Obj()) // no data rows
	l := waitPhase(t, nsLocal, name, listsv1.PhaseFailed)
	if c := condition(l.Status.Conditions, listsv1.ConditionReady); c == nil || c.Reason != controllers.ReasonInvalidInput {
		t.Fatalf("Ready = %+v, want reason %s", c, controllers.ReasonInvalidInput)
	}
	// As in TestListMetrics: the totals land just after the status patch.
	for i, s := range []struct {
		name   string
		labels map[string]string
	}{{metrics.ListsFailed, failed}, {metrics.ListDuration, failedDuration}} {
		eventually(t, 10*time.Second, s.name+" to grow", func() (bool, string) {
			got := managerSample(t, s.name, s.labels) - before[i]
			return got >= 1, fmt.Sprintf("%s%v grew by %v, want at least 1", s.name, s.labels, got)
		})
	}

	outcomes := []string{metrics.CallbackDelivered, metrics.CallbackRetrying, metrics.CallbackFailed}
	prior := map[string]float64{}
	for _, o := range outcomes {
		prior[o] = managerSample(t, metrics.CallbackDeliveries, map[string]string{"outcome": o})
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer bad.Close()
	for _, u := range []string{ok.URL, bad.URL} {
		name := uniqueName("metrics-cb")
		create(t, builders.MakeEmailList(nsLocal, name).APIUpload(putUpload(t, []byte("a@example.com\n")), testTenant).CallbackURL(u).Obj())
		eventually(t, 20*time.Second, "callback settled", func() (bool, string) {
			l := getList(t, nsLocal, name)
			return l.Status.Callback != nil && l.Status.Callback.State != listsv1.CallbackPending, ""
		})
	}
	// The suite gives up after 3 attempts: 1 delivered, 2 retried, 1 failed.
	want := map[string]float64{metrics.CallbackDelivered: 1, metrics.CallbackRetrying: 2, metrics.CallbackFailed: 1}
	for _, o := range outcomes {
		if got := managerSample(t, metrics.CallbackDeliveries, map[string]string{"outcome": o}) - prior[o]; got < want[o] {
			t.Errorf("callback attempts %s grew by %v, want at least %v", o, got, want[o])
		}
	}
}
