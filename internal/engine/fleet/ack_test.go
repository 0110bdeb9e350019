package fleet

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/simtime"
	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
	"github.com/emaildata/emaildata/internal/platform/clock"
)

// lateClock is the clock of a starved process: every timer, ticker and
// sleep of it fires late by late (its goroutines get no CPU in time).
type lateClock struct {
	clock.Wall
	late time.Duration
}

func (c lateClock) NewTimer(d time.Duration) clock.Timer   { return c.Wall.NewTimer(d + c.late) }
func (c lateClock) NewTicker(d time.Duration) clock.Ticker { return c.Wall.NewTicker(d + c.late) }
func (c lateClock) After(d time.Duration) <-chan time.Time { return c.Wall.After(d + c.late) }
func (c lateClock) Sleep(d time.Duration)                  { c.Wall.Sleep(d + c.late) }
func (c lateClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.Wall.AfterFunc(d+c.late, f)
}

// ackOptions are the options of seat of two, on clk.
func ackOptions(seat int, clk clock.Clock) Options {
	return Options{LeaseTTL: time.Second, HealthInterval: 100 * time.Millisecond, FailAfter: 2, Clock: clk,
		Share: Share{Seat: seat, Seats: 2, Turn: 300 * time.Millisecond, Skew: 20 * time.Millisecond}}
}

// advanceUntil lets simulated time pass in steps of step until cond holds,
// failing after within.
func advanceUntil(t *testing.T, within, step time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(within); !cond(); simtime.Advance(step) {
		if !time.Now().Before(end) {
			t.Fatalf("no %s within %v", what, within)
		}
	}
}

// switchWorld is a fleet backend two processes share, with the means to
// cut it and to let time pass: a Memory in a synctest bubble, or a real
// Redis behind a relay on the wall clock.
type switchWorld struct {
	open  func(o Options) *Fleet
	down  func(bool)
	pass  func(time.Duration)
	until func(t *testing.T, within time.Duration, what string, cond func() bool)
	// divided and shared are how long the load runs in the fallback and
	// after the switch back.
	divided, shared time.Duration
}

// starvedSwitch: two processes fall back to divided leases when the
// backend goes away; when it comes back, one of them is starved (its
// timers fire late by more than a HealthInterval), so it ends its divided
// sessions well after the agreed resume time. The other must not take
// shared leases until the starved one has left the stale set: never more
// connections at once than the host's limit, on either side of the switch.
func starvedSwitch(t *testing.T, w switchWorld, late time.Duration) {
	a := w.open(ackOptions(0, nil))
	defer a.Close()
	b := w.open(ackOptions(1, lateClock{late: late}))
	defer b.Close()
	// Two connections: one each while divided, so that each process holds
	// a divided lease, the starved one through the switch; two workers
	// each, so that shared leases would take both.
	k := Key{Egress: DefaultEgress, Host: "192.0.2.21:25"}
	lim := Limits{Conns: 2, Rate: 50}
	// Sessions of 400 ms, but the starved process's divided ones last
	// until the switch ends them (Lost): it holds one at the switch for
	// certain. Of 400 ms, they ended at its health checks on a real Redis
	// (they began at one, the check that saw the backend back waking the
	// workers that waited for the divided budget, and its checks are
	// 400 ms apart too, HealthInterval + late), the switch's among them:
	// the switch came within 1 ms of a session's end or the next one's
	// start in 19 runs of 175, and now and then between the two (issue 33:
	// 1 run in 125 to 200 beside 6 busy loops); it found no divided lease
	// held, rightly lost none, and the stats below failed.
	hold := func(f *Fleet) func() time.Duration {
		return func() time.Duration {
			if f == b && f.Mode() == ModeFallback {
				return 0 // a lease had meanwhile in shared mode is lost already
			}
			return 400 * time.Millisecond
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var rec recorder
	var wg sync.WaitGroup
	for i, f := range []*Fleet{a, a, b, b} {
		who := string("aabb"[i]) + string("1212"[i])
		wg.Go(func() {
			if err := hammerAs(ctx, who, f, k, lim, hold(f), &rec); err != nil {
				t.Errorf("hammer: %v", err)
			}
		})
	}
	cut := time.Now()
	w.down(true)
	// Generous bounds: on a real Redis they wait for health checks and
	// client timeouts of a loaded machine (not what is tested).
	w.until(t, 20*time.Second, "fallback", func() bool { return a.Mode() == ModeFallback && b.Mode() == ModeFallback })
	w.pass(w.divided) // divided leases from LeaseTTL + HealthInterval after the fallback
	// The starved process's divided leases start late (its timer): the
	// backend comes back once it holds one, whatever the load, for the
	// switch to end.
	w.until(t, 20*time.Second, "a divided lease of the starved process", func() bool { return holdsDivided(b) })
	w.down(false)
	back := time.Now()
	w.until(t, 20*time.Second, "shared mode again", func() bool { return a.Mode() == ModeShared && b.Mode() == ModeShared })
	w.pass(w.shared) // shared leases again
	// And at least one lease from after the agreed resume time and the
	// starved process's lateness: on a loaded machine the waits before it
	// may outlast w.shared, so the load runs on until one is recorded
	// (in a bubble it is there already).
	after := func() (n int) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, s := range rec.spans {
			if s.from.After(back.Add(a.settle() + late)) {
				n++
			}
		}
		return n
	}
	w.until(t, 20*time.Second, "a lease after the switch back", func() bool { return after() > 0 })
	cancel()
	wg.Wait()

	if m := maxConcurrent(rec.spans); m > 2 {
		t.Errorf("%d connections at once around the switch, limit 2", m)
	}
	if st := b.Stats(); st.Fallbacks != 1 || st.LeasesLost == 0 {
		t.Errorf("starved process stats %+v: want one fallback and its divided leases ended at the switch", st)
	}
	if t.Failed() { // what happened, for the next one to read
		rec.mu.Lock()
		sort.Slice(rec.spans, func(i, j int) bool { return rec.spans[i].from.Before(rec.spans[j].from) })
		for _, s := range rec.spans {
			t.Logf("%s from %v to %v start %v lost %v", s.who, s.from.Sub(cut), s.to.Sub(cut), s.start.Sub(cut), s.lost)
		}
		rec.mu.Unlock()
		t.Logf("cut at 0, back at %v; a %+v; b %+v", back.Sub(cut), a.Stats(), b.Stats())
	}
}

// holdsDivided reports whether f holds a divided lease.
func holdsDivided(f *Fleet) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.divided) > 0
}

// TestSwitchBackWaitsForStarvedProcess runs starvedSwitch on a Memory in
// simulated time (testing/synctest): the outage, the starvation and the
// switch take no real time, the run is the same every time, and it has
// three connections at once with the former margin (shared leases 1.5
// HealthIntervals after the resume time); and on a real Redis cut and
// restored, on the wall clock, where whether the starved process holds a
// lease at the switch is chance.
func TestSwitchBackWaitsForStarvedProcess(t *testing.T) {
	t.Parallel()                        // the Redis case waits on the wall clock
	const late = 300 * time.Millisecond // > HealthInterval (100 ms), < LeaseTTL
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := NewMemory(nil)
			starvedSwitch(t, switchWorld{
				open: func(o Options) *Fleet { return OpenMemory(context.Background(), m, o) },
				down: m.SetDown,
				pass: simtime.Advance,
				until: func(t *testing.T, d time.Duration, what string, cond func() bool) {
					advanceUntil(t, d, 50*time.Millisecond, what, cond)
				},
				divided: 2 * time.Second, shared: 3 * time.Second, // free in a bubble
			}, late)
		})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		u := redisURL(t) // skips (or fails under CI) without Redis; cleans the prefix
		c := newCutter(t)
		prefix := u[strings.Index(u, "prefix=")+len("prefix="):]
		starvedSwitch(t, switchWorld{
			open: func(o Options) *Fleet { return ready(t, c.url(prefix), o) },
			down: func(down bool) {
				if down {
					c.cut()
				} else {
					c.restore()
				}
			},
			pass: realtime.Let,
			until: func(t *testing.T, d time.Duration, what string, cond func() bool) {
				realtime.Eventually(t, d, what, cond)
			},
			divided: time.Second, shared: time.Second,
		}, late)
	})
}

// TestSwitchBackBoundedForDeadProcess: a process that dies in the
// fallback, holding a divided lease, never leaves the stale set; the
// others wait for its mark to age a LeaseTTL, no longer (exactly: the
// first health check after that).
func TestSwitchBackBoundedForDeadProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMemory(nil)
		a := OpenMemory(context.Background(), m, ackOptions(0, nil))
		defer a.Close()
		b := OpenMemory(context.Background(), m, ackOptions(1, nil))
		k := Key{Egress: DefaultEgress, Host: "192.0.2.22:25"}
		lim := Limits{Conns: 1, Rate: 50}

		m.SetDown(true)
		advanceUntil(t, 5*time.Second, 50*time.Millisecond, "fallback", func() bool {
			return a.Mode() == ModeFallback && b.Mode() == ModeFallback
		})
		if _, err := b.Acquire(context.Background(), k, lim); err != nil { // held until it dies
			t.Fatal(err)
		}
		m.SetDown(false)
		// It dies just before the resume time, its mark fresh.
		advanceUntil(t, 5*time.Second, 10*time.Millisecond, "the eve of the resume time", func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			_, ok := m.stale[b.b.(*memClient).id]
			return ok && !m.resumeAt.IsZero() && time.Until(m.resumeAt) < 50*time.Millisecond
		})
		_ = b.Close() // dies: its divided lease is never released
		m.mu.Lock()
		lastMark := m.stale[b.b.(*memClient).id]
		m.mu.Unlock()

		advanceUntil(t, 5*time.Second, 10*time.Millisecond, "shared mode", func() bool { return a.Mode() == ModeShared })
		l, err := a.Acquire(context.Background(), k, lim)
		if err != nil {
			t.Fatal(err)
		}
		got := time.Now()
		l.Release()
		o := ackOptions(0, nil)
		if earliest := lastMark.Add(o.LeaseTTL); got.Before(earliest) {
			t.Errorf("shared lease %v after the dead process's last mark, before the lease TTL (%v)", got.Sub(lastMark), o.LeaseTTL)
		}
		if latest := lastMark.Add(o.LeaseTTL + o.HealthInterval); got.After(latest) {
			t.Errorf("shared lease %v after the dead process's last mark, want by LeaseTTL + HealthInterval (%v)", got.Sub(lastMark), o.LeaseTTL+o.HealthInterval)
		}
		if a.Mode() != ModeShared {
			t.Errorf("mode %s, want shared", a.Mode())
		}
	})
}

// TestSwitchBackBoundedForLongStarvedProcess (issue 33, item 4): a
// process starved for longer than LeaseTTL + 2 HealthIntervals (every
// timer of it late by that much) is alive and holds a divided lease past
// the resume time; its marks in the stale set come one late health check
// apart, so each ages past a LeaseTTL before the next. The others' shared
// leases wait for the stale set to empty, but no longer than a LeaseTTL
// after the starved process's last mark (then it counts as dead): the
// first shared lease comes at the first check of the other process after
// the set emptied or the mark aged a LeaseTTL, whichever is first, and
// never while the set held a mark younger than a LeaseTTL at that
// process's last check. In simulated time, observed every millisecond.
func TestSwitchBackBoundedForLongStarvedProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := ackOptions(0, nil)
		late := o.LeaseTTL + 2*o.HealthInterval + 500*time.Millisecond
		m := NewMemory(nil)
		a := OpenMemory(context.Background(), m, o)
		defer a.Close()
		b := OpenMemory(context.Background(), m, ackOptions(1, lateClock{late: late}))
		defer b.Close()
		bid := b.b.(*memClient).id
		// A connection each while divided (turns would be missed by the
		// starved process's late timers, every time).
		k := Key{Egress: DefaultEgress, Host: "192.0.2.23:25"}
		lim := Limits{Conns: 2, Rate: 50}

		m.SetDown(true)
		advanceUntil(t, 20*time.Second, 10*time.Millisecond, "fallback", func() bool {
			return a.Mode() == ModeFallback && b.Mode() == ModeFallback
		})
		// The starved process's session: it holds its divided lease until
		// the switch takes it (at its late timer), then gives it up.
		held, released := make(chan struct{}), make(chan time.Time, 1)
		go func() {
			l, err := b.Acquire(context.Background(), k, lim)
			close(held)
			if err != nil {
				t.Error(err)
				released <- time.Now()
				return
			}
			<-l.Lost()
			l.Release()
			released <- time.Now()
		}()
		<-held
		m.SetDown(false)

		// Every millisecond: what the stale set holds of b; once a is
		// shared, a's first shared lease.
		type seen struct {
			at   time.Time
			mark time.Time // zero: b not in the stale set
		}
		var marks []seen
		var got time.Time
		gotc := make(chan time.Time, 1)
		asking := false
		for end := time.Now().Add(20 * time.Second); got.IsZero(); {
			m.mu.Lock()
			marks = append(marks, seen{time.Now(), m.stale[bid]})
			m.mu.Unlock()
			if !asking && a.Mode() == ModeShared {
				asking = true
				go func() {
					l, err := a.Acquire(context.Background(), k, lim)
					if err != nil {
						t.Error(err)
						gotc <- time.Now()
						return
					}
					gotc <- time.Now()
					l.Release()
				}()
			}
			select {
			case got = <-gotc:
				continue
			default:
			}
			if time.Now().After(end) {
				t.Fatalf("no shared lease within 20 s of the backend's return (shared mode: %v)", asking)
			}
			simtime.Advance(time.Millisecond)
		}
		m.mu.Lock()
		resumeAt := m.resumeAt
		m.mu.Unlock()
		// b's last mark before a's lease, and when b left the stale set
		// after it (zero: not before the lease).
		var left, lastMark time.Time
		for _, s := range marks {
			if s.mark.IsZero() && left.IsZero() && !lastMark.IsZero() {
				left = s.at
			}
			if !s.mark.IsZero() {
				lastMark, left = s.mark, time.Time{}
			}
		}
		t.Logf("from the resume time: b's last mark %v, b left the stale set %v (zero: not before a's lease), a's first shared lease %v",
			lastMark.Sub(resumeAt), max(0, left.Sub(resumeAt)), got.Sub(resumeAt))
		if got.Before(resumeAt) {
			t.Errorf("shared lease %v before the resume time", resumeAt.Sub(got))
		}
		// Waited for the set to empty, or for b's mark to age a LeaseTTL:
		// from whichever came first, at a's next check (a HealthInterval).
		from := lastMark.Add(o.LeaseTTL)
		if !left.IsZero() && left.Before(from) {
			from = left
		}
		if got.Before(from) || got.After(from.Add(o.HealthInterval)) {
			t.Errorf("shared lease at %v, want within a HealthInterval from %v (b's last mark %v + LeaseTTL, or b leaving at %v)",
				got.Sub(resumeAt), from.Sub(resumeAt), lastMark.Sub(resumeAt), max(0, left.Sub(resumeAt)))
		}

		// b, alive, gives its divided lease up only at its late switch (its
		// late timer or health check after the resume time): a did not
		// wait for that, only a LeaseTTL after b's last mark. Then b
		// leaves the stale set.
		var rel time.Time
		advanceUntil(t, 20*time.Second, time.Millisecond, "the starved process's release", func() bool {
			select {
			case rel = <-released:
				return true
			default:
				return false
			}
		})
		if !got.Before(rel) {
			t.Errorf("b released its divided lease %v after the resume time, a's shared lease %v: the test wants a not to wait for it",
				rel.Sub(resumeAt), got.Sub(resumeAt))
		}
		advanceUntil(t, 20*time.Second, time.Millisecond, "b out of the stale set", func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			_, in := m.stale[bid]
			return !in
		})
	})
}

// slowCheck is a Memory client one of whose health checks, the first
// from a given time on, is held until the test lets it go (a busy machine,
// a slow backend): what the test does meanwhile happens between the
// check's start and its stale mark.
type slowCheck struct {
	*memClient
	mu          sync.Mutex
	from        time.Time // zero: no check is held
	began, gate chan struct{}
}

func (s *slowCheck) arm(from time.Time) {
	s.mu.Lock()
	s.from, s.began, s.gate = from, make(chan struct{}), make(chan struct{})
	s.mu.Unlock()
}

func (s *slowCheck) check(ctx context.Context, settle time.Duration) (health, error) {
	s.mu.Lock()
	var gate chan struct{}
	if !s.from.IsZero() && !time.Now().Before(s.from) {
		s.from, gate = time.Time{}, s.gate
		close(s.began)
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return s.memClient.check(ctx, settle)
}

// TestOwnMarkLeftAfterSlowCheck (issue 33): a health check that marks
// the process stale (it was in the fallback, or held a divided lease when
// the check began) while the switch back, or the release of its last
// divided lease, takes it out of the stale set must not leave its mark
// behind: the mark held every process's shared leases back a LeaseTTL
// (1 in 150 runs of TestSwitchBackBoundedForLongStarvedProcess, where
// the resume timer and a health check are due at the same instant).
// With the check held the order is forced; the first shared lease comes
// as the check ends, at the check of the tick due meanwhile (a ticker
// keeps one), which sees the set empty.
func TestOwnMarkLeftAfterSlowCheck(t *testing.T) {
	o := ackOptions(0, nil)
	took := o.HealthInterval * 3 / 2 // the held check
	for _, c := range []struct {
		name string
		// slowFrom is when the held check starts, from the resume time;
		// release when the divided lease is given up, from the same
		// (negative: none held).
		slowFrom, release time.Duration
	}{
		{"the switch back during the check", -o.HealthInterval, -1},
		{"the last divided lease released during the check", o.HealthInterval, o.HealthInterval * 6 / 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := NewMemory(nil)
				oo := o
				oo.defaults()
				s := &slowCheck{memClient: &memClient{m: m, id: newID(), ttl: oo.LeaseTTL, st: &counters{}, leases: map[*Lease]struct{}{}}}
				m.clients[s.memClient] = struct{}{}
				a := newFleet(context.Background(), nil, s, oo)
				defer a.Close()
				// A lane a seat (Conns 2, 2 seats): a divided lease lasts
				// until the switch takes it, no turn ends it.
				k := Key{Egress: DefaultEgress, Host: "192.0.2.24:25"}
				lim := Limits{Conns: 2, Rate: 50}

				m.SetDown(true)
				advanceUntil(t, 5*time.Second, 10*time.Millisecond, "fallback", func() bool { return a.Mode() == ModeFallback })
				var divided *Lease
				if c.release >= 0 {
					var err error
					if divided, err = a.Acquire(context.Background(), k, lim); err != nil {
						t.Fatal(err)
					}
				}
				m.SetDown(false)
				var resume time.Time
				advanceUntil(t, 5*time.Second, 10*time.Millisecond, "a resume time", func() bool {
					m.mu.Lock()
					defer m.mu.Unlock()
					resume = m.resumeAt
					return resume.After(time.Now())
				})
				s.arm(resume.Add(c.slowFrom))
				advanceUntil(t, 5*time.Second, time.Millisecond, "the held check", func() bool {
					select {
					case <-s.began:
						return true
					default:
						return false
					}
				})
				if divided != nil {
					simtime.Advance(time.Until(resume.Add(c.release)))
					select {
					case <-divided.Lost():
					default:
						t.Fatal("the switch back did not end the divided lease")
					}
					divided.Release()
				}
				simtime.Advance(time.Until(resume.Add(c.slowFrom + took)))
				close(s.gate)
				l, err := a.Acquire(context.Background(), k, lim)
				if err != nil {
					t.Fatal(err)
				}
				got := time.Since(resume)
				l.Release()
				if a.Mode() != ModeShared {
					t.Errorf("mode %s, want shared", a.Mode())
				}
				if want := c.slowFrom + took; got != want {
					t.Errorf("first shared lease %v after the resume time, want %v", got, want)
				}
			})
		})
	}
}
