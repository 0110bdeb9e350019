package durhist

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestObserveSnapshotCounters(t *testing.T) {
	h := New(0.01, 0.1, 1)
	for _, d := range []time.Duration{
		5 * time.Millisecond, 10 * time.Millisecond, // ≤ 0.01 (a bound is inclusive)
		50 * time.Millisecond, // ≤ 0.1
		2 * time.Second,       // +Inf
	} {
		h.Observe(d)
	}
	s := h.Snapshot()
	if s.Count != 4 || s.Sum != 2065*time.Millisecond {
		t.Fatalf("count %d sum %v, want 4 and 2.065s", s.Count, s.Sum)
	}
	m := map[string]float64{}
	s.AddCounters(m, "x_seconds")
	want := map[string]float64{
		"x_seconds_count": 4, "x_seconds_sum": 2.065,
		"x_seconds_le_0.01": 2, "x_seconds_le_0.1": 3, "x_seconds_le_1": 3,
	}
	if len(m) != len(want) {
		t.Fatalf("counters %v, want %v", m, want)
	}
	for k, v := range want {
		if math.Abs(m[k]-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

func TestZeroSnapshotWritesNothing(t *testing.T) {
	m := map[string]float64{}
	Snapshot{}.AddCounters(m, "x")
	if len(m) != 0 {
		t.Errorf("zero snapshot wrote %v", m)
	}
}

func TestParseKey(t *testing.T) {
	names := []string{"a_seconds", "a_seconds_total_seconds"}
	tests := []struct {
		key   string
		name  string
		part  Part
		bound float64
		ok    bool
	}{
		{"a_seconds_count", "a_seconds", Count, 0, true},
		{"a_seconds_sum", "a_seconds", Sum, 0, true},
		{"a_seconds_le_0.005", "a_seconds", Bucket, 0.005, true},
		{"a_seconds_le_120", "a_seconds", Bucket, 120, true},
		{"a_seconds_le_x", "", 0, 0, false},
		{"a_seconds", "", 0, 0, false},
		{"b_seconds_count", "", 0, 0, false},
		{"dns_lookups", "", 0, 0, false},
	}
	for _, tt := range tests {
		name, part, bound, ok := ParseKey(tt.key, names)
		if name != tt.name || part != tt.part || bound != tt.bound || ok != tt.ok {
			t.Errorf("ParseKey(%q) = %q %v %v %v, want %q %v %v %v", tt.key, name, part, bound, ok, tt.name, tt.part, tt.bound, tt.ok)
		}
	}
	// Every key AddCounters writes parses back.
	m := map[string]float64{}
	h := New(0.001, 0.25, 30)
	h.Observe(time.Millisecond)
	h.Snapshot().AddCounters(m, "a_seconds")
	for k := range m {
		if _, _, _, ok := ParseKey(k, names); !ok {
			t.Errorf("key %q written but not parsed", k)
		}
	}
}

func TestConcurrentObserve(t *testing.T) {
	h := New(0.001)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				h.Observe(time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if s := h.Snapshot(); s.Count != 8000 || s.Cumulative[0] != 8000 {
		t.Errorf("snapshot %+v, want 8000 in the first bucket", s)
	}
}

func TestNewRejectsUnsortedBounds(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(1, 0.5) did not panic")
		}
	}()
	New(1, 0.5)
}
