package smtpprobe

import (
	"context"
	"fmt"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// A host that counts connection attempts in a sliding window, refused ones
// too (sendmail's ratecontrol, Haraka's limit plugin;
// mailworld.Domain.ConnRateSliding): 3 a 30 s window, a 4 s greeting, 100
// addresses (half missing). Sessions at 0, 4 and 8.06 s; the fourth, at
// 12.08 s, is refused: the host counts
// connections in windows, 3 of them, and is tried again when the window
// of the first ends (32 s, as Postfix's anvil would take it). Refused
// of the second has ended (36 s): a host that counts the refused 12.08 s
// as well still has room for one, and anvil's fixed window has ended.
// From then on 36 and 40.02 s; the last session ends at 44.02 s. (The
// sessions go past their quiet budget of 9 rejections into the host's
// 20 ms error sleeps, the cost model counting up to
// MaxSleepingConnsPerHost such sessions at once: 5 sessions, not 6.
// Without that, and with the sleep before QUIT counted as work: sessions
// of 9 rejections, dials at 0, 4, 8, 12 (refused), 36, 40 and 44 s, done
// at 48 s.) One refusal (main's engine: 3, the limit lowered to 2, 72 s).
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
		want := []time.Duration{0, 4 * time.Second, 8060 * time.Millisecond, 12080 * time.Millisecond, 36 * time.Second, 40020 * time.Millisecond}
		learnt := p.cfg.HostMemory.Load(e.w.MXAddrs("slide.test")[0])
		if wrong != 0 || hs.Rejected != 1 || st.Refusals != 1 || st.Sessions != 5 || learnt.ConnsPerWindow != 3 ||
			took != 44020*time.Millisecond || fmt.Sprint(dials) != fmt.Sprint(want) {
			t.Errorf("dials at %v (want %v), took %v, %d wrong, %d refused, %d sessions, learnt %+v: want 1 refusal, 5 sessions, 3 a window, done at 44.02s",
				dials, want, took, wrong, hs.Rejected, st.Sessions, learnt)
		}
		t.Logf("dials at %v; took %v, %d wrong, host total %d rejected %d max conc %d, prober dials %d sessions %d refusals %d, learnt %+v", dials, took, wrong, hs.Total, hs.Rejected, hs.MaxConcurrent, st.Dials, st.Sessions, st.Refusals, p.cfg.HostMemory.Load(e.w.MXAddrs("slide.test")[0]))
	})
}

// A host refused again a connection made after the window its first
// refusal taught had ended: it counts every attempt over a sliding
// window. Its limit stays; attempts are counted as it counts them, the
// refused ones too (slidingSlotLocked).
func TestSlidingDetected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const win = 30 * time.Second
		p := New(Config{RefusalWindow: win})
		// Sleep without p.mu (a backoff timer's kick takes it).
		sleep := func(d time.Duration) { p.mu.Unlock(); simtime.Advance(d); p.mu.Lock() }
		p.mu.Lock()
		defer p.mu.Unlock()
		q := p.host("127.0.0.1:25")
		t0 := time.Now()
		at := func(d time.Duration) time.Time { return t0.Add(d) }
		for _, d := range []time.Duration{0, 4 * time.Second, 8 * time.Second} {
			p.noteAcceptedLocked(q, at(d))
		}
		q.sessions = 1
		rf := &refusalError{tg: target{host: "mx", addr: q.key}, reply: reply{code: 421}}
		sleep(12 * time.Second)
		p.refusedLocked(q, rf, at(12*time.Second), true, nil)
		if q.hs.ConnsPerWindow != 3 || q.sliding || !q.backoffUntil.Equal(at(36*time.Second)) {
			t.Fatalf("first refusal: %d a window, sliding %v, retry at %v: want 3, fixed, 36s", q.hs.ConnsPerWindow, q.sliding, q.backoffUntil.Sub(t0))
		}
		sleep(24 * time.Second)
		p.refusedLocked(q, rf, at(36*time.Second), true, nil)
		if q.hs.ConnsPerWindow != 3 || !q.sliding {
			t.Fatalf("second refusal: %d a window, sliding %v: want 3, sliding", q.hs.ConnsPerWindow, q.sliding)
		}
		// Attempts within the last 32 s (the window and windowMargin).
		for _, step := range []struct {
			at   time.Duration
			ok   bool
			wait time.Duration // backoffUntil when refused
		}{
			{36 * time.Second, false, 40 * time.Second}, // 8, 12 and 36 s
			{40 * time.Second, true, 0},                 // 12 and 36 s
			{40 * time.Second, false, 44 * time.Second}, // 12, 36 and 40 s
			{44 * time.Second, true, 0},                 // 36 and 40 s
		} {
			sleep(time.Until(at(step.at)))
			if got := p.windowSlotLocked(q, time.Now()); got != step.ok || (!got && !q.backoffUntil.Equal(at(step.wait))) {
				t.Fatalf("at %v: slot %v, wait until %v; want %v, %v", step.at, got, q.backoffUntil.Sub(t0), step.ok, step.wait)
			}
		}
	})
}

// A host that taught a window (a refusal with none of ours open: anvil
// lagging behind a closed connection says the same words) refuses again,
// after the window, a connection dialled beside one of ours: with no more
// at once ever accepted, it keeps to the sessions open beside it from then
// on (issue 33's stress run: the engine went on opening a second session
// at a host taking one at once, refused 7 times).
func TestWindowRefusedBesideOurs(t *testing.T) {
	for _, tc := range []struct {
		name         string
		beside, peak int
		wantConns    int
	}{
		{"one beside, never two at once", 1, 1, 1},
		{"one beside, two at once before", 1, 2, 0},
		{"none beside", 0, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const win = 30 * time.Second
				p := New(Config{RefusalWindow: win})
				sleep := func(d time.Duration) { p.mu.Unlock(); simtime.Advance(d); p.mu.Lock() }
				p.mu.Lock()
				defer p.mu.Unlock()
				q := p.host("127.0.0.1:25")
				t0 := time.Now()
				for _, d := range []time.Duration{0, 4 * time.Second} {
					p.noteAcceptedLocked(q, t0.Add(d))
				}
				rf := &refusalError{tg: target{host: "mx", addr: q.key}, reply: reply{code: 421}}
				sleep(8 * time.Second)
				p.refusedLocked(q, rf, time.Now(), true, nil)
				if q.hs.ConnsPerWindow != 2 || q.hs.Conns != 0 {
					t.Fatalf("first refusal: learnt %+v, want 2 a window", q.hs)
				}
				q.peakOpen = tc.peak
				sleep(q.windowEnd.Sub(time.Now()))
				again := &refusalError{tg: rf.tg, reply: rf.reply, beside: tc.beside}
				p.refusedLocked(q, again, time.Now(), true, nil)
				if q.hs.ConnsPerWindow != 2 || !q.sliding || q.hs.Conns != tc.wantConns {
					t.Fatalf("second refusal: learnt %+v, sliding %v; want 2 a window, sliding, %d at once", q.hs, q.sliding, tc.wantConns)
				}
			})
		})
	}
}
