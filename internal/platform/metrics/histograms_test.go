package metrics

import (
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emaildata/emaildata/internal/engine/mxdns"
	"github.com/emaildata/emaildata/internal/engine/smtpprobe"
	"github.com/emaildata/emaildata/internal/platform/durhist"
)

// TestEngineHistogramKeys ties the exported histograms to the engines'
// own keys, and checks every key a busy engine reports is exported.
func TestEngineHistogramKeys(t *testing.T) {
	want := []string{mxdns.ResolutionDurationKey, smtpprobe.SessionDurationKey, smtpprobe.SetupDurationKey}
	got := EngineHistogramKeys()
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("engine histograms %v, engines report %v", got, want)
	}
	h := durhist.New(0.1).Snapshot()
	counters := mxdns.Stats{ResolveLatency: h}.Counters()
	maps.Copy(counters, smtpprobe.Stats{SessionLatency: h, SetupLatency: h}.Counters())
	for k := range counters {
		_, _, _, isHist := durhist.ParseKey(k, EngineHistogramKeys())
		if !isHist && !slices.Contains(EngineCounterKeys(), k) {
			t.Errorf("engine key %q is neither an exported counter nor an exported histogram", k)
		}
	}
}

// TestManagerAddsHistograms checks that shard summaries' histogram
// counters add up into one Prometheus histogram per family.
func TestManagerAddsHistograms(t *testing.T) {
	shard := func(ds ...time.Duration) map[string]float64 {
		h := durhist.New(0.01, 0.1, 1)
		for _, d := range ds {
			h.Observe(d)
		}
		out := map[string]float64{}
		h.Snapshot().AddCounters(out, smtpprobe.SessionDurationKey)
		return out
	}
	m := NewManager()
	m.ListFinished(ListOutcome{Service: "email_validation", Phase: "Results", Engine: shard(5*time.Millisecond, 50*time.Millisecond)})
	m.ListFinished(ListOutcome{Service: "email_validation", Phase: "Results", Engine: shard(500*time.Millisecond, 3*time.Second)})
	m.AddEngine(map[string]float64{smtpprobe.SessionDurationKey + "_count": -5}) // ignored

	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	mf := gather(t, reg)[Prefix+smtpprobe.SessionDurationKey]
	if mf == nil {
		t.Fatal("session duration histogram not exported")
	}
	hist := mf.GetMetric()[0].GetHistogram()
	if hist.GetSampleCount() != 4 || math.Abs(hist.GetSampleSum()-3.555) > 1e-9 {
		t.Errorf("count %d sum %v, want 4 and 3.555", hist.GetSampleCount(), hist.GetSampleSum())
	}
	want := map[float64]uint64{0.01: 1, 0.1: 2, 1: 3}
	for _, b := range hist.GetBucket() {
		if b.GetCumulativeCount() != want[b.GetUpperBound()] {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[b.GetUpperBound()])
		}
	}
	if gather(t, reg)[Prefix+mxdns.ResolutionDurationKey] != nil {
		t.Error("a histogram no shard reported is exported empty")
	}
}
