package controllers_test

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/metrics"
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
// lists at the same time, so the deltas are lower bounds.
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
			create(t, newList(tc.ns, name).configMap(name, "list.csv").header().column(3).obj())
			waitPhase(t, tc.ns, name, listsv1.PhaseResults)
			for i, s := range series {
				if got := managerSample(t, s.name, s.labels) - before[i]; got < s.min {
					t.Errorf("%s%v grew by %v, want at least %v", s.name, s.labels, got, s.min)
				}
			}
			if n := managerSample(t, metrics.Lists, map[string]string{"phase": "Results"}); n < 1 {
				t.Errorf("%s{phase=Results} = %v, want at least 1", metrics.Lists, n)
			}
		})
	}
}
