package smtpprobe

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// The pacing host's floor names the limit that paced it, and its span is
// never below it.
func TestPacingHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		dom  mailworld.Domain
		mod  func(*Config)
		why  PaceReason
	}{
		{"greylisting", mailworld.Domain{Greylist: 100 * time.Millisecond}, nil, PaceGreylisting},
		// Two RCPTs a session: 15 sessions at 5 a second.
		{"connection rate", mailworld.Domain{RcptLimit: 2}, func(c *Config) { c.RatePerHost = 5 }, PaceConnRate},
		// Slow replies, no other limit: the sessions' open time.
		{"concurrency", mailworld.Domain{Latency: 50 * time.Millisecond}, nil, PaceConcurrency},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				boxes := map[string]mailworld.Behaviour{}
				var addrs []string
				for i := range 30 {
					lp := fmt.Sprintf("u%d", i)
					addrs = append(addrs, lp+"@pace.test")
					boxes[lp] = mailworld.Exists
				}
				d := tc.dom
				d.Name, d.Mailboxes = "pace.test", boxes
				e := startWorld(t, mailworld.Options{}, d)
				p := e.prober(tc.mod)
				if _, ok := p.PacingHost(); ok {
					t.Fatal("a pacing host before any session")
				}
				res := make([]Result, len(addrs))
				if err := p.ProbeBatch(ctxTimeout(t, time.Minute), "pace.test", e.mx("pace.test"), addrs, res); err != nil {
					t.Fatal(err)
				}
				h, ok := p.PacingHost()
				if !ok || h.Why != tc.why || h.Floor <= 0 || h.Span < h.Floor {
					t.Fatalf("pacing host %+v: want a floor set by %q, at most the span", h, tc.why)
				}
				// One host: the sums are its own figures.
				if st := p.Stats(); st.HostFloor != h.Floor || st.HostSpan != h.Span {
					t.Errorf("stats floor %v span %v, host %v %v", st.HostFloor, st.HostSpan, h.Floor, h.Span)
				}
				if line := h.Pace(); !strings.Contains(line, string(tc.why)) {
					t.Errorf("Pace() = %q", line)
				}
			})
		})
	}
}
