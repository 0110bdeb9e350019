package simtime

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestAdvanceMovesTheBubblesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var fired atomic.Bool
		time.AfterFunc(time.Hour, func() { fired.Store(true) })
		Advance(time.Hour - time.Nanosecond)
		if fired.Load() || time.Since(start) != time.Hour-time.Nanosecond {
			t.Fatalf("after %v: fired %v", time.Since(start), fired.Load())
		}
		Advance(time.Nanosecond)
		if !fired.Load() {
			t.Fatal("the timer due at 1h did not fire")
		}
	})
}

func TestAdvanceRefusesTheWallClock(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Advance outside a bubble did not panic: it would have slept on the wall clock")
		}
	}()
	Advance(time.Hour)
}
