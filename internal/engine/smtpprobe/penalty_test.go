package smtpprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/mailworld"
	"github.com/emaildata/emaildata/internal/kits/simtime"
)

// dialCounter wraps a dialer and counts attempts per address.
type dialCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *dialCounter) dialer(next DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.mu.Lock()
		if d.n == nil {
			d.n = make(map[string]int)
		}
		d.n[addr]++
		d.mu.Unlock()
		return next(ctx, network, addr)
	}
}

func (d *dialCounter) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[addr]
}

// A tarpit costs one GreetingTimeout per HostPenaltyTTL, not one per batch,
// and its addresses are Timeout (code 5): no host ever answered.
func TestHostPenaltyTarpit(t *testing.T) {
	world := func(t *testing.T) *env {
		return startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "tarpit.test", Tarpit: true},
			mailworld.Domain{Name: "ok.test", Mailboxes: okBoxes},
		)
	}
	const step = 300 * time.Millisecond
	addrs := []string{"a@tarpit.test", "b@tarpit.test", "c@tarpit.test"}
	batch := func(t *testing.T, e *env, p *Prober) ([]Result, time.Duration) {
		t.Helper()
		res := make([]Result, len(addrs))
		t0 := time.Now()
		if err := p.ProbeBatch(ctxTimeout(t, 5*time.Second), "tarpit.test", e.mx("tarpit.test"), addrs, res); err != nil {
			t.Fatalf("ProbeBatch: %v", err)
		}
		return res, time.Since(t0)
	}

	t.Run("skipped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			p := e.prober(func(c *Config) { c.GreetingTimeout = step })
			res, took := batch(t, e, p)
			if took != step {
				t.Fatalf("first batch took %v, want the greeting timeout, %v", took, step)
			}
			for _, r := range res {
				if r.Outcome != Timeout || !errors.Is(r.Err, os.ErrDeadlineExceeded) || errors.Is(r.Err, ErrHostSkipped) {
					t.Fatalf("first batch: %+v", r)
				}
			}
			dials := p.Stats().Dials
			for i := range 3 {
				res, took = batch(t, e, p)
				if st := p.Stats(); st.Dials != dials || took != 0 {
					t.Fatalf("batch %d dialled the stalled host again (%d dials, want %d) or waited (%v)", i+2, st.Dials, dials, took)
				}
				for _, r := range res {
					if r.Outcome != Timeout || r.Host != "mx1.tarpit.test" ||
						!errors.Is(r.Err, ErrAllHostsFailed) || !errors.Is(r.Err, ErrHostSkipped) || !errors.Is(r.Err, os.ErrDeadlineExceeded) {
						t.Fatalf("batch %d: %+v", i+2, r)
					}
				}
			}
			if st := p.Stats(); st.Dials != dials || st.HostsSkipped != 3 {
				t.Fatalf("stats %+v: want no new dial (%d), 3 skips", st, dials)
			}
			if hs := hostStats(e, "mx1.tarpit.test"); hs.Total != int(dials) {
				t.Fatalf("tarpit saw %d connections, want %d", hs.Total, dials)
			}
			// Other domains are unaffected.
			if r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("ok.test"), "alice@ok.test"); r.Outcome != Deliverable {
				t.Fatalf("ok.test: %+v", r)
			}
		})
	})

	t.Run("ttl", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			const ttl = 10 * time.Second
			p := e.prober(func(c *Config) { c.GreetingTimeout = step; c.HostPenaltyTTL = ttl })
			batch(t, e, p) // penalised at its end
			dials := p.Stats().Dials
			simtime.Advance(ttl - time.Nanosecond)
			if res, _ := batch(t, e, p); p.Stats().Dials != dials || !errors.Is(res[0].Err, ErrHostSkipped) {
				t.Fatalf("just before the TTL: %+v, dials %d -> %d: host not skipped", res[0], dials, p.Stats().Dials)
			}
			simtime.Advance(time.Nanosecond)
			res, took := batch(t, e, p)
			if took != step || p.Stats().Dials != dials+1 {
				t.Fatalf("at the TTL: took %v, dials %d -> %d: host not tried again", took, dials, p.Stats().Dials)
			}
			if errors.Is(res[0].Err, ErrHostSkipped) || !errors.Is(res[0].Err, os.ErrDeadlineExceeded) {
				t.Fatalf("after the TTL: %+v", res[0])
			}
			// Stalled again: penalised again.
			dials = p.Stats().Dials
			if res, _ := batch(t, e, p); p.Stats().Dials != dials || !errors.Is(res[0].Err, ErrHostSkipped) {
				t.Fatalf("after re-marking: %+v, dials %d -> %d", res[0], dials, p.Stats().Dials)
			}
		})
	})

	t.Run("disabled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			p := e.prober(func(c *Config) { c.GreetingTimeout = step; c.HostPenaltyTTL = -1 })
			if p.Config().HostPenaltyTTL >= 0 {
				t.Fatalf("HostPenaltyTTL %v", p.Config().HostPenaltyTTL)
			}
			batch(t, e, p)
			if _, took := batch(t, e, p); took != step {
				t.Fatalf("second batch took %v: penalty not disabled", took)
			}
			if st := p.Stats(); st.Dials != 2 || st.HostsSkipped != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	})

	// The caller's deadline cutting the wait says nothing about the host.
	t.Run("ctx deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			p := e.prober(func(c *Config) { c.GreetingTimeout = 2 * time.Second })
			for range 2 {
				r := p.Probe(ctxTimeout(t, 100*time.Millisecond), e.mx("tarpit.test"), "a@tarpit.test")
				if r.Outcome != Timeout || errors.Is(r.Err, ErrHostSkipped) {
					t.Fatalf("got %+v", r)
				}
			}
			if st := p.Stats(); st.Dials != 2 || st.HostsSkipped != 0 || p.penalties.len() != 0 {
				t.Fatalf("stats %+v, %d penalties", st, p.penalties.len())
			}
		})
	})

	t.Run("cancel", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := world(t)
			p := e.prober(func(c *Config) { c.GreetingTimeout = 2 * time.Second })
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			if r := p.Probe(ctx, e.mx("tarpit.test"), "a@tarpit.test"); r.Outcome != Timeout {
				t.Fatalf("got %+v", r)
			}
			if n := p.penalties.len(); n != 0 {
				t.Fatalf("%d penalties after a cancellation", n)
			}
		})
	})
}

// A refusing primary is not dialled again within the TTL; after it, it is.
func TestHostPenaltyPrimaryDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := startWorld(t, mailworld.Options{},
			mailworld.Domain{Name: "pd.test", PrimaryDown: true, Mailboxes: aliceOnly},
			mailworld.Domain{Name: "drop.test", DropConnection: true},
		)
		mxa := e.w.MXAddrs("pd.test")
		primary, secondary := mxa[0], mxa[1]
		const ttl = 10 * time.Second
		var dc dialCounter
		p := e.prober(func(c *Config) { c.Dialer = dc.dialer(e.dial); c.HostPenaltyTTL = ttl })
		probe := func(addr string, want Outcome) Result {
			t.Helper()
			r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("pd.test"), addr)
			if r.Outcome != want || r.Host != "mx2.pd.test" {
				t.Fatalf("%s: %+v", addr, r)
			}
			return r
		}
		probe("alice@pd.test", Deliverable)
		if dc.count(primary) != 1 || dc.count(secondary) != 1 {
			t.Fatalf("dials %v", dc.n)
		}
		probe("nobody@pd.test", Missing)
		probe("alice@pd.test", Deliverable)
		// (The secondary's session may carry the later probes: it waits a
		// moment for more work before QUIT.)
		if dc.count(primary) != 1 || dc.count(secondary) < 1 {
			t.Fatalf("dials %v: the dead primary was dialled again", dc.n)
		}
		if st := p.Stats(); st.HostsSkipped != 2 || st.HostFailures != 1 {
			t.Fatalf("stats %+v", st)
		}
		simtime.Advance(ttl)
		probe("alice@pd.test", Deliverable)
		if dc.count(primary) != 2 {
			t.Fatalf("dials %v: the primary was not tried again after the TTL", dc.n)
		}

		// A host that greets and then drops the connection is reachable: it
		// is not penalised.
		drop := e.w.MXAddrs("drop.test")[0]
		for range 2 {
			if r := p.Probe(ctxTimeout(t, 5*time.Second), e.mx("drop.test"), "a@drop.test"); r.Outcome != Unconfirmed || errors.Is(r.Err, ErrHostSkipped) {
				t.Fatalf("drop.test: %+v", r)
			}
		}
		if n := dc.count(drop); n < 2 {
			t.Fatalf("drop.test dialled %d times", n)
		}
	})
}

// A penalised host that answers (e.g. a concurrent probe got through) is
// forgiven at once.
func TestHostPenaltyClearedOnSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, nil)
		p, mx := fakeProber(t, nil, f)
		addr := mx[0].Addrs[0].String()
		p.penalties.mark(net.JoinHostPort(addr, fmt.Sprint(p.cfg.Port)), os.ErrDeadlineExceeded)
		if r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test"); r.Outcome != Timeout || !errors.Is(r.Err, ErrHostSkipped) {
			t.Fatalf("got %+v", r)
		}
		// Another batch already past the check succeeds: the mark goes.
		s, err := p.dial(target{host: mx[0].Host, addr: net.JoinHostPort(addr, fmt.Sprint(p.cfg.Port)), ip: addr}, time.Now().Add(5*time.Second), false, p.cfg.Dialer)
		if err != nil {
			t.Fatal(err)
		}
		s.quit(quitTimeout)
		if r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test"); r.Outcome != Deliverable {
			t.Fatalf("got %+v", r)
		}
	})
}

func TestHostPenaltiesLRU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHostPenalties(2, time.Minute, nil, "", nil)
		boom := errors.New("boom")
		h.mark("a", boom)
		h.mark("b", boom)
		h.mark("c", boom) // evicts a
		if h.check("a") != nil || h.check("b") == nil || h.len() != 2 {
			t.Fatalf("eviction: len %d", h.len())
		}
		if err := h.check("c"); !errors.Is(err, ErrHostSkipped) || !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
		simtime.Advance(time.Minute)
		if h.check("b") != nil || h.check("c") != nil || h.len() != 0 {
			t.Fatalf("expiry: len %d", h.len())
		}
		if newHostPenalties(10, -1, nil, "", nil) != nil {
			t.Fatal("negative TTL: want no memory")
		}
		var nilH *hostPenalties
		nilH.mark("x", boom)
		if nilH.check("x") != nil || nilH.len() != 0 {
			t.Fatal("nil penalties")
		}
	})
}

// A connect that runs into ConnectTimeout (a dialer that only returns the
// context's error) penalises the host and is Timeout (never answered); one
// cut by the caller's deadline does not penalise.
func TestHostPenaltyConnectTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, nil)
		hang := func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		p, mx := fakeProber(t, func(c *Config) { c.ConnectTimeout = 100 * time.Millisecond; c.Dialer = hang }, f)
		if r := p.Probe(ctxTimeout(t, 50*time.Millisecond), mx, "ok1@fake.test"); r.Outcome != Timeout || p.penalties.len() != 0 {
			t.Fatalf("ctx deadline: %+v, %d penalties", r, p.penalties.len())
		}
		if r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test"); r.Outcome != Timeout || errors.Is(r.Err, ErrHostSkipped) {
			t.Fatalf("first: %+v", r)
		}
		// Skipped without a connect, at once: the dial count and the
		// bubble's clock say so.
		start := time.Now()
		r := p.Probe(ctxTimeout(t, 5*time.Second), mx, "ok1@fake.test")
		if r.Outcome != Timeout || !errors.Is(r.Err, ErrHostSkipped) || !errors.Is(r.Err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Fatalf("second: %+v after %v", r, time.Since(start))
		}
		if st := p.Stats(); st.Dials != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
}
