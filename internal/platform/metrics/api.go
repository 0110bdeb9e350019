package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// apiLatencyBuckets cover a health check (sub-millisecond) to a slow
// upload or a GET /v5/ev at its 30 s bound.
var apiLatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// API holds one REST API server's metrics in a registry of its own (tests
// run several servers in one process).
type API struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	verdicts    *prometheus.CounterVec
	engine      *engineCollector
}

// NewAPI returns the API's metrics, registered with the Go and process
// collectors in a new registry.
func NewAPI() *API {
	a := &API{
		reg:         prometheus.NewRegistry(),
		requests:    counterVec(APIRequests),
		latency:     histogramVec(APIRequestDuration, apiLatencyBuckets),
		rateLimited: counterVec(APIRateLimited),
		verdicts:    counterVec(Verifications),
		engine:      newEngineCollector(),
	}
	a.reg.MustRegister(a.requests, a.latency, a.rateLimited, a.verdicts, a.engine, newHistCollector(a.engine.histograms),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return a
}

// Registry returns the API's registry.
func (a *API) Registry() *prometheus.Registry { return a.reg }

// Handler serves the registry in the Prometheus exposition format.
func (a *API) Handler() http.Handler { return promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}) }

// Request counts one request under its route pattern (never the raw path:
// it carries IDs and keys); a 429 is also counted as rate limited.
func (a *API) Request(route string, code int, d time.Duration) {
	c := strconv.Itoa(code)
	a.requests.WithLabelValues(route, c).Inc()
	a.latency.WithLabelValues(route, c).Observe(d.Seconds())
	if code == http.StatusTooManyRequests {
		a.rateLimited.WithLabelValues(route).Inc()
	}
}

// Verdict counts one verification verdict of service by status code.
func (a *API) Verdict(service string, code int) {
	a.verdicts.WithLabelValues(labelOr(service), strconv.Itoa(code)).Inc()
}

// SetEngine sets the function that snapshots the API verifier's engine
// counters (cumulative, keys as the engines' Counters() name them), read
// at each scrape.
func (a *API) SetEngine(fn func() map[string]float64) { a.engine.fn.Store(&fn) }

// engineCollector exports cumulative engine counters read at scrape time.
type engineCollector struct {
	descs map[string]*prometheus.Desc
	fn    atomic.Pointer[func() map[string]float64]
}

func newEngineCollector() *engineCollector {
	e := &engineCollector{descs: map[string]*prometheus.Desc{}}
	for _, c := range engineCounters {
		e.descs[c.key] = prometheus.NewDesc(EngineCounterName(c.key), c.help, nil, nil)
	}
	return e
}

func (e *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range e.descs {
		ch <- d
	}
}

// histograms reads the engine histograms from the same snapshot.
func (e *engineCollector) histograms() map[string]*histState {
	states := map[string]*histState{}
	if fn := e.fn.Load(); fn != nil && *fn != nil {
		addHistCounters(states, (*fn)())
	}
	return states
}

func (e *engineCollector) Collect(ch chan<- prometheus.Metric) {
	fn := e.fn.Load()
	if fn == nil || *fn == nil {
		return
	}
	for k, v := range (*fn)() {
		if d, ok := e.descs[k]; ok {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
		}
	}
}
