package smtpprobe

import (
	"context"
	"fmt"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
)

// A host that counts connection attempts in a sliding window, refused ones
// too (sendmail's ratecontrol, Haraka's limit plugin;
// mailworld.Domain.ConnRateSliding): 3 a 30 s window, a 4 s greeting, 100
// addresses (half missing: 9 rejections a session, 6 sessions). Sessions
// at 0, 4 and 8 s; the fourth, at 12 s, is refused: the host counts
// connections in windows, 3 of them, and is tried again when the window
// of the first ends (32 s, as Postfix's anvil would take it). Refused
// again (its window still holds 4, 8 and the refused 12 s): the host
// slides and keeps its limit of 3, and from then on the engine counts its
// attempts as the host does, refused ones too, over the last window (and
// windowMargin, 32 s): 4, 8, 12 and 32 s leave room at 40 s (4 and 8 have
// left), 12 s leaves at 44 s, 32 s at 64 s; the last session ends at
// 68 s. Two refusals in all, never a third in a row (before, each retry
// inside the window lowered the limit, and a host could refuse
// MaxRefusals times in a row and fail).
func TestSlidingWindowRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 30 * time.Second
		boxes, addrs := halfMissing("slide.test", 100)
		e := startWorld(t, mailworld.Options{}, mailworld.Domain{Name: "slide.test", Mailboxes: boxes,
			SoftErrors: 10, HardErrors: 20, ErrorSleep: 20 * time.Millisecond, ConnRateLimit: 3, ConnRateWindow: window, ConnRateSliding: true,
			GreetingDelay: 4 * time.Second})
		t0 := time.Now()
		var dials []time.Duration
		p := e.prober(func(c *Config) {
			c.RefusalBackoff, c.RefusalWindow = 100*time.Millisecond, window
			d := c.Dialer
			c.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials = append(dials, time.Since(t0))
				return d(ctx, network, addr)
			}
		})
		res := make([]Result, len(addrs))
		if err := p.ProbeBatch(ctxTimeout(t, 10*time.Minute), "slide.test", e.mx("slide.test"), addrs, res); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		wrong := 0
		for i, r := range res {
			if want := map[bool]Outcome{true: Deliverable, false: Missing}[i%2 == 0]; r.Outcome != want {
				wrong++
			}
		}
		hs := hostStats(e, "mx1.slide.test")
		st := p.Stats()
		want := []time.Duration{0, 4 * time.Second, 8 * time.Second, 12 * time.Second, 32 * time.Second,
			40 * time.Second, 44 * time.Second, 64 * time.Second}
		learnt := p.cfg.HostMemory.Load(e.w.MXAddrs("slide.test")[0])
		if wrong != 0 || hs.Rejected != 2 || st.Refusals != 2 || st.Sessions != 6 || learnt.ConnsPerWindow != 3 ||
			took != 68*time.Second || fmt.Sprint(dials) != fmt.Sprint(want) {
			t.Errorf("dials at %v (want %v), took %v, %d wrong, %d refused, %d sessions, learnt %+v: want 2 refusals, 6 sessions, 3 a window, done at 68s",
				dials, want, took, wrong, hs.Rejected, st.Sessions, learnt)
		}
		t.Logf("dials at %v; took %v, %d wrong, host total %d rejected %d max conc %d, prober dials %d sessions %d refusals %d, learnt %+v", dials, took, wrong, hs.Total, hs.Rejected, hs.MaxConcurrent, st.Dials, st.Sessions, st.Refusals, p.cfg.HostMemory.Load(e.w.MXAddrs("slide.test")[0]))
	})
}
