package controllers

import (
	"testing"
	"time"
)

func TestSourceGrace(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		waited    time.Duration
		grace     time.Duration
		poll      time.Duration
		wantAfter time.Duration
		wantWait  bool
	}{
		{"fresh: the next poll", 0, time.Minute, 5 * time.Second, 5 * time.Second, true},
		{"near the end: the grace's end", 58 * time.Second, time.Minute, 5 * time.Second, 2 * time.Second, true},
		{"grace over", time.Minute, time.Minute, 5 * time.Second, 0, false},
		{"no grace", 0, 0, 5 * time.Second, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after, wait := sourceGrace(created.Add(tt.waited), created, tt.grace, tt.poll)
			if after != tt.wantAfter || wait != tt.wantWait {
				t.Errorf("sourceGrace = %v, %v; want %v, %v", after, wait, tt.wantAfter, tt.wantWait)
			}
		})
	}
}
