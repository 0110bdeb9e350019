package controllers

import (
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// The status summary of what paced a list: one host, durations rounded
// to the millisecond, nothing when no shard said.
func TestPacingStatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          *listservice.Pace
		span, floor time.Duration
	}{
		{"none", nil, 0, 0},
		{"greylisting", &listservice.Pace{Host: "127.0.0.1:25", SpanSeconds: 61.23456, FloorSeconds: 60, Reason: "greylisting"}, 61235 * time.Millisecond, time.Minute},
	} {
		got := pacing(tc.in)
		if (got == nil) != (tc.in == nil) {
			t.Fatalf("%s: %+v", tc.name, got)
		}
		if got != nil && (got.Host != tc.in.Host || got.Reason != tc.in.Reason || got.Span.Duration != tc.span || got.Floor.Duration != tc.floor) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}
