package metrics

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// listDurationBuckets span a small list (seconds) to a large one (a day).
var listDurationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400}

// Manager holds the manager's metrics. Jobs are short-lived, so workers
// leave their counters in the shard summaries and the manager adds each
// finished list's totals here once (ListFinished).
type Manager struct {
	rows      *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	failed    *prometheus.CounterVec
	shards    *prometheus.CounterVec
	verdicts  *prometheus.CounterVec
	callbacks *prometheus.CounterVec
	engine    map[string]prometheus.Counter
	hists     histTotals
	histC     *histCollector
	lists     *phaseCollector
	orphans   *prometheus.CounterVec
	orphanB   *prometheus.CounterVec
	sweeps    *prometheus.CounterVec
}

// NewManager returns unregistered manager metrics.
func NewManager() *Manager {
	m := &Manager{
		rows:      counterVec(ListRowsProcessed),
		duration:  histogramVec(ListDuration, listDurationBuckets),
		failed:    counterVec(ListsFailed),
		shards:    counterVec(ListShards),
		verdicts:  counterVec(Verifications),
		callbacks: counterVec(CallbackDeliveries),
		engine:    map[string]prometheus.Counter{},
		lists:     &phaseCollector{desc: prometheus.NewDesc(Lists, family(Lists).Help, family(Lists).Labels, nil)},
		orphans:   counterVec(OrphanUploads),
		orphanB:   counterVec(OrphanUploadBytes),
		sweeps:    counterVec(UploadSweeps),
	}
	for _, c := range engineCounters {
		m.engine[c.key] = prometheus.NewCounter(prometheus.CounterOpts{Name: EngineCounterName(c.key), Help: c.help})
	}
	m.histC = newHistCollector(m.hists.snapshot)
	return m
}

// Collectors returns every collector of m.
func (m *Manager) Collectors() []prometheus.Collector {
	out := []prometheus.Collector{m.rows, m.duration, m.failed, m.shards, m.verdicts, m.callbacks, m.lists, m.histC, m.orphans, m.orphanB, m.sweeps}
	for _, c := range engineCounters {
		out = append(out, m.engine[c.key])
	}
	return out
}

// Register registers every collector of m with reg.
func (m *Manager) Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range m.Collectors() {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}

// ListOutcome is what one list's run adds to the totals when it first
// reaches a final phase.
type ListOutcome struct {
	Service string
	Phase   string // Processed, Results or Failed
	Reason  string // the Ready condition's reason, counted for Failed lists
	// Seconds from creation to the final phase.
	Seconds float64
	// Shards that finished and shards that did not (failed indexes).
	ShardsSucceeded, ShardsFailed int
	// Rows processed by the finished shards.
	Rows int64
	// StatusCodes counts verification verdicts (the shards' reporting
	// "status_code" buckets; empty for other services).
	StatusCodes map[string]int64
	// Engine adds up the shards' engine counters (summary Counters).
	Engine map[string]float64
}

// ListFinished adds one list's outcome. Call it once per list.
func (m *Manager) ListFinished(o ListOutcome) {
	service := labelOr(o.Service)
	if o.Phase != "" {
		m.duration.WithLabelValues(service, labelOr(o.Phase)).Observe(max(0, o.Seconds))
	}
	if o.Reason != "" {
		m.failed.WithLabelValues(service, labelOr(o.Reason)).Inc()
	}
	m.rows.WithLabelValues(service).Add(float64(max(0, o.Rows)))
	m.shards.WithLabelValues(service, ShardSucceeded).Add(float64(max(0, o.ShardsSucceeded)))
	m.shards.WithLabelValues(service, ShardFailed).Add(float64(max(0, o.ShardsFailed)))
	for code, n := range o.StatusCodes {
		if _, err := strconv.Atoi(code); err == nil && n > 0 {
			m.verdicts.WithLabelValues(service, code).Add(float64(n))
		}
	}
	m.AddEngine(o.Engine)
}

// AddEngine adds engine counters and histograms (keys as the engines'
// Counters() name them); unknown keys and negative values are ignored.
func (m *Manager) AddEngine(counters map[string]float64) {
	for k, v := range counters {
		if c, ok := m.engine[k]; ok && v > 0 {
			c.Add(v)
		}
	}
	m.hists.add(counters)
}

// CallbackAttempt counts one callback attempt by outcome
// (CallbackDelivered, CallbackRetrying, CallbackFailed).
func (m *Manager) CallbackAttempt(outcome string) {
	m.callbacks.WithLabelValues(labelOr(outcome)).Inc()
}

// UploadSweep counts one sweep of the uploads folder: its outcome
// (SweepSucceeded, SweepFailed) and the orphans it removed, by kind
// (objects, incomplete multipart uploads) and the objects' bytes.
func (m *Manager) UploadSweep(outcome string, objects, multiparts int, bytes int64) {
	m.sweeps.WithLabelValues(labelOr(outcome)).Inc()
	m.orphans.WithLabelValues("object").Add(float64(max(0, objects)))
	m.orphans.WithLabelValues("multipart").Add(float64(max(0, multiparts)))
	m.orphanB.WithLabelValues().Add(float64(max(0, bytes)))
}

// SetListPhases sets the function that counts lists by phase at each
// scrape (the manager reads its informer cache; nil exports nothing).
func (m *Manager) SetListPhases(fn func() map[string]float64) { m.lists.fn.Store(&fn) }

// phaseCollector exports the Lists gauge from a function called at scrape
// time, so the gauge is never stale and survives restarts.
type phaseCollector struct {
	desc *prometheus.Desc
	fn   atomic.Pointer[func() map[string]float64]
}

func (p *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	fn := p.fn.Load()
	if fn == nil || *fn == nil {
		return
	}
	for phase, n := range (*fn)() {
		if validKey(phase) {
			ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, n, phase)
		}
	}
}

// labelOr keeps a label value that is safe to export, else "other".
func labelOr(v string) string {
	if validKey(v) {
		return v
	}
	return "other"
}
