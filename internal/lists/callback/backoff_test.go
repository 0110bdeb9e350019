package callback

import (
	"math"
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 10 * time.Second, Max: 5 * time.Minute, Attempts: 8}
	want := []time.Duration{
		10 * time.Second,  // attempt 1
		20 * time.Second,  // 2
		40 * time.Second,  // 3
		80 * time.Second,  // 4
		160 * time.Second, // 5
		5 * time.Minute,   // 6: 320s capped
		5 * time.Minute,   // 7
	}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w)
		}
	}

	tests := []struct {
		name    string
		b       Backoff
		attempt int
		want    time.Duration
	}{
		{"attempt 0 treated as 1", b, 0, 10 * time.Second},
		{"negative attempt treated as 1", b, -3, 10 * time.Second},
		{"huge attempt stays capped", b, math.MaxInt, 5 * time.Minute},
		{"max not a power-of-two multiple", Backoff{Base: time.Second, Max: 5 * time.Second}, 4, 5 * time.Second},
		{"base above max is capped", Backoff{Base: time.Hour, Max: time.Minute}, 1, time.Minute},
		{"zero base means no delay", Backoff{Max: time.Minute}, 3, 0},
		{"no max grows", Backoff{Base: time.Second}, 11, 1024 * time.Second},
		{"no max does not overflow", Backoff{Base: time.Second}, 200, time.Duration(math.MaxInt64)},
	}
	for _, tt := range tests {
		if got := tt.b.Delay(tt.attempt); got != tt.want {
			t.Errorf("%s: Delay(%d) = %v, want %v", tt.name, tt.attempt, got, tt.want)
		}
	}
}

func TestBackoffJitter(t *testing.T) {
	b := Backoff{Base: 10 * time.Second, Max: time.Minute, Jitter: 0.5}
	for attempt := 1; attempt <= 6; attempt++ {
		full := Backoff{Base: b.Base, Max: b.Max}.Delay(attempt)
		for range 200 {
			got := b.Delay(attempt)
			if got > full || got < full/2 {
				t.Fatalf("Delay(%d) with jitter 0.5 = %v, want within [%v, %v]", attempt, got, full/2, full)
			}
		}
	}
	// Jitter above 1 is clamped: still positive, never above the cap.
	wild := Backoff{Base: time.Second, Max: time.Second, Jitter: 7}
	for range 200 {
		if got := wild.Delay(1); got <= 0 || got > time.Second {
			t.Fatalf("Delay with jitter 7 = %v, want in (0, 1s]", got)
		}
	}
	// Jitter with an uncapped, overflowing delay stays positive.
	huge := Backoff{Base: time.Second, Jitter: 1}
	if got := huge.Delay(200); got <= 0 {
		t.Fatalf("Delay(200) with full jitter = %v, want positive", got)
	}
}

func TestBackoffExhausted(t *testing.T) {
	tests := []struct {
		attemptsAllowed int
		made            int
		want            bool
	}{
		{5, 0, false},
		{5, 4, false},
		{5, 5, true},
		{5, 6, true},
		{1, 0, false},
		{1, 1, true},
		{0, 0, false}, // zero value: one attempt, no retries
		{0, 1, true},
		{-2, 1, true},
	}
	for _, tt := range tests {
		b := Backoff{Base: time.Second, Attempts: tt.attemptsAllowed}
		if got := b.Exhausted(tt.made); got != tt.want {
			t.Errorf("Backoff{Attempts: %d}.Exhausted(%d) = %v, want %v", tt.attemptsAllowed, tt.made, got, tt.want)
		}
	}
}
