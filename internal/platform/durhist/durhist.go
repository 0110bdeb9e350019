// Package durhist counts durations into fixed buckets with atomics, so an
// engine can report a latency distribution as plain cumulative counters:
// shard summaries carry counters only, the manager adds them up, and the
// metrics package turns them back into Prometheus histograms.
//
// A histogram named n is written as the counter keys n_count, n_sum
// (seconds) and, for each upper bound b, n_le_<b> (cumulative, as
// Prometheus buckets are). Counters of this form add up across shards and
// subtract into per-shard deltas like any other counter.
package durhist

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Histogram counts observations by upper bound. The zero value is unusable;
// create it with New. It is safe for concurrent use.
type Histogram struct {
	bounds []float64       // seconds, ascending
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sumNs  atomic.Int64
}

// New returns a histogram with the given upper bounds in seconds, which
// must be ascending.
func New(bounds ...float64) *Histogram {
	for i := 1; i < len(bounds); i++ {
		if bounds[i] <= bounds[i-1] {
			panic("durhist: bounds not ascending")
		}
	}
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe counts one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(h.bounds) && s > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// Snapshot returns the histogram's state at this moment.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bounds: h.bounds, Cumulative: make([]uint64, len(h.bounds)), Sum: time.Duration(h.sumNs.Load())}
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
		if i < len(h.bounds) {
			s.Cumulative[i] = n
		}
	}
	s.Count = n
	return s
}

// Snapshot is a histogram's state: cumulative counts per upper bound, the
// total count and the sum of the observations.
type Snapshot struct {
	Bounds     []float64
	Cumulative []uint64
	Count      uint64
	Sum        time.Duration
}

// AddCounters writes s into m under name (see the package comment). A
// zero Snapshot writes nothing.
func (s Snapshot) AddCounters(m map[string]float64, name string) {
	if s.Bounds == nil {
		return
	}
	m[name+"_count"] = float64(s.Count)
	m[name+"_sum"] = s.Sum.Seconds()
	for i, b := range s.Bounds {
		m[BucketKey(name, b)] = float64(s.Cumulative[i])
	}
}

// BucketKey is the counter key of the bucket of name with upper bound b.
func BucketKey(name string, b float64) string {
	return name + "_le_" + strconv.FormatFloat(b, 'g', -1, 64)
}

// Part says which part of a histogram a counter key holds.
type Part int

// Parts of a histogram.
const (
	Count Part = iota + 1
	Sum
	Bucket
)

// ParseKey splits a counter key written by AddCounters for one of names:
// the histogram's name, the part, and for a bucket its upper bound.
func ParseKey(key string, names []string) (name string, part Part, bound float64, ok bool) {
	for _, n := range names {
		rest, found := strings.CutPrefix(key, n+"_")
		if !found {
			continue
		}
		switch {
		case rest == "count":
			return n, Count, 0, true
		case rest == "sum":
			return n, Sum, 0, true
		case strings.HasPrefix(rest, "le_"):
			b, err := strconv.ParseFloat(rest[3:], 64)
			if err != nil {
				return "", 0, 0, false
			}
			return n, Bucket, b, true
		}
	}
	return "", 0, 0, false
}
