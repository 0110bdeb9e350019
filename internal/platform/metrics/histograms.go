package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emaildata/emaildata/internal/platform/durhist"
)

// engineHistograms are latency distributions the engines report as
// durhist counters (keys <key>_count, <key>_sum and <key>_le_<bound>, in
// mxdns.Stats and smtpprobe.Stats Counters; shard summaries carry them).
// Both the manager (totals of finished shards) and the API (its own
// verifier) export them as histograms named Prefix+key.
var engineHistograms = []engineCounter{
	{"dns_resolution_duration_seconds", "DNS MX resolution latency (cache misses)."},
	{"smtp_session_duration_seconds", "SMTP connection lifetime, connect to close (tarpits included)."},
	{"smtp_setup_duration_seconds", "SMTP session setup latency: connect, greeting and EHLO."},
}

// EngineHistogramKeys lists the engine histogram keys that are exported.
func EngineHistogramKeys() []string {
	out := make([]string, len(engineHistograms))
	for i, h := range engineHistograms {
		out[i] = h.key
	}
	return out
}

// histState is one histogram's totals: cumulative bucket counts by upper
// bound, count and sum.
type histState struct {
	count, sum float64
	buckets    map[float64]float64
}

// addHistCounters adds the histogram keys among counters to states.
// Other keys are ignored, as are negative values.
func addHistCounters(states map[string]*histState, counters map[string]float64) {
	keys := EngineHistogramKeys()
	for k, v := range counters {
		name, part, bound, ok := durhist.ParseKey(k, keys)
		if !ok || v < 0 {
			continue
		}
		st := states[name]
		if st == nil {
			st = &histState{buckets: map[float64]float64{}}
			states[name] = st
		}
		switch part {
		case durhist.Count:
			st.count += v
		case durhist.Sum:
			st.sum += v
		case durhist.Bucket:
			st.buckets[bound] += v
		}
	}
}

// histCollector exports engine histograms from states it gets at scrape
// time.
type histCollector struct {
	descs  map[string]*prometheus.Desc
	states func() map[string]*histState
}

func newHistCollector(states func() map[string]*histState) *histCollector {
	c := &histCollector{descs: map[string]*prometheus.Desc{}, states: states}
	for _, h := range engineHistograms {
		c.descs[h.key] = prometheus.NewDesc(Prefix+h.key, h.help, nil, nil)
	}
	return c
}

func (c *histCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *histCollector) Collect(ch chan<- prometheus.Metric) {
	for name, st := range c.states() {
		d := c.descs[name]
		if d == nil || st.count <= 0 {
			continue
		}
		b := make(map[float64]uint64, len(st.buckets))
		for le, n := range st.buckets {
			b[le] = uint64(n)
		}
		if m, err := prometheus.NewConstHistogram(d, uint64(st.count), st.sum, b); err == nil {
			ch <- m
		}
	}
}

// histTotals adds up engine histograms under a lock (the manager's
// totals of finished shards).
type histTotals struct {
	mu     sync.Mutex
	states map[string]*histState
}

func (t *histTotals) add(counters map[string]float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.states == nil {
		t.states = map[string]*histState{}
	}
	addHistCounters(t.states, counters)
}

// snapshot copies the totals, so a scrape never reads them while a list
// adds to them.
func (t *histTotals) snapshot() map[string]*histState {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]*histState, len(t.states))
	for name, st := range t.states {
		cp := &histState{count: st.count, sum: st.sum, buckets: make(map[float64]float64, len(st.buckets))}
		for le, n := range st.buckets {
			cp.buckets[le] = n
		}
		out[name] = cp
	}
	return out
}
