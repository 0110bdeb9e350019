package realtime

import (
	"context"
	"flag"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	if !Until(context.Background(), func() bool { return n.Load() == 3 }) {
		t.Fatal("Until gave up without a deadline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if Until(ctx, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
}

func TestPastTTL(t *testing.T) {
	start := time.Now()
	PastTTL(20 * time.Millisecond)
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v, before the TTL", d)
	}
}

// WaitingParallel raises -test.parallel past GOMAXPROCS, unless the
// command line gave it (then it is left alone).
func TestWaitingParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	before := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", before) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	n := runtime.GOMAXPROCS(0) + 3
	WaitingParallel(n)
	want := strconv.Itoa(n)
	if given {
		want = before
	}
	if got := f.Value.String(); got != want {
		t.Fatalf("-test.parallel %s (given on the command line: %v), want %s", got, given, want)
	}
}
