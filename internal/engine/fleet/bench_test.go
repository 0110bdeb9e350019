package fleet

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/emaildata/emaildata/internal/platform/cputime"
)

// roundTrips counts the commands (and pipelines) a client sends: one round
// trip each.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

func benchFleet(b *testing.B) (*Fleet, *roundTrips) { return benchFleetAt(b, redisURL(b)) }

// benchFleetAt opens a process's Fleet on url (processes of one fleet share it).
func benchFleetAt(b *testing.B, url string) (*Fleet, *roundTrips) {
	f, err := Open(context.Background(), url, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	// Wait out a new prefix's resume time once.
	l, err := f.Acquire(context.Background(), Key{Egress: DefaultEgress, Host: "198.51.100.1:25"}, Limits{Conns: 1, Rate: 1000})
	if err != nil {
		b.Fatal(err)
	}
	l.Release()
	rt := &roundTrips{}
	f.Backend().Client().AddHook(rt)
	return f, rt
}

// measure reports round trips and the process's CPU time per operation
// (client side: Redis runs elsewhere) for the part of the benchmark
// between its call and the returned func's.
func measure(b *testing.B, rt *roundTrips) func() {
	cpu0 := cputime.Self()
	rt.n.Store(0)
	b.ResetTimer()
	return func() {
		b.StopTimer()
		b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
		if cpu1 := cputime.Self(); cpu0 > 0 {
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
		}
	}
}

// host spreads keys over many hosts, as a list does.
func host(i int) Key {
	return Key{Egress: DefaultEgress, Host: net.JoinHostPort("192.0.2."+strconv.Itoa(i%250), "25")}
}

// One connection's politeness: a slot, the rate, the release.
func BenchmarkRedisSession(b *testing.B) {
	f, rt := benchFleet(b)
	ctx := context.Background()
	lim := Limits{Conns: 2, Rate: 1e6}
	done := measure(b, rt)
	for i := range b.N {
		k := host(i)
		l, err := f.Acquire(ctx, k, lim)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Wait(ctx, k, lim); err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
	done()
}

func BenchmarkRedisAcquireRelease(b *testing.B) {
	f, rt := benchFleet(b)
	ctx := context.Background()
	lim := Limits{Conns: 2, Rate: 1e6}
	done := measure(b, rt)
	for i := range b.N {
		l, err := f.Acquire(ctx, host(i), lim)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
	done()
}

func BenchmarkRedisRateCheck(b *testing.B) {
	f, rt := benchFleet(b)
	ctx := context.Background()
	lim := Limits{Conns: 2, Rate: 1e6}
	done := measure(b, rt)
	for i := range b.N {
		if err := f.Wait(ctx, host(i), lim); err != nil {
			b.Fatal(err)
		}
	}
	done()
}

// The learnt state a session reads before it starts: the host's penalty
// and limits.
func BenchmarkRedisHostState(b *testing.B) {
	f, rt := benchFleet(b)
	ctx := context.Background()
	done := measure(b, rt)
	for i := range b.N {
		k := host(i)
		if _, _, err := f.Penalty(ctx, k); err != nil {
			b.Fatal(err)
		}
		if _, err := f.HostLimits(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
	done()
}

func BenchmarkLocalSession(b *testing.B) {
	l := NewLocal(0, nil)
	ctx := context.Background()
	lim := Limits{Conns: 2, Rate: 1e6}
	for i := range b.N {
		k := host(i)
		ls, err := l.Acquire(ctx, k, lim)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Wait(ctx, k, lim); err != nil {
			b.Fatal(err)
		}
		ls.Release()
	}
}

// Waiting for another process's catch-all verdict: claimWaiters probes
// of claimDomains domains, in one process, lose the claim to another
// process, which stores the verdicts claimDelay later. "poll" is the
// waiters' loop before pub/sub (smtpprobe's awaitClaimed polled with a
// backoff from 20 ms to 2 s: a verdict read and a claim try each time),
// "watch" is today's (Watch, a read and a claim try, then a wake-up or a
// 5 s safety-net poll). One op is one round: every waiter has its verdict.
// Per op: the waiting process's round trips and the test process's CPU.
func BenchmarkClaimWait(b *testing.B) {
	const claimWaiters, claimDomains, claimDelay = 1000, 50, 2 * time.Second
	for _, mode := range []string{"poll", "watch"} {
		b.Run(mode, func(b *testing.B) {
			url := redisURL(b)
			holder, _ := benchFleetAt(b, url)
			waiter, rt := benchFleetAt(b, url)
			ctx := context.Background()
			round := 0
			done := measure(b, rt)
			for range b.N {
				round++
				var wg sync.WaitGroup
				for d := range claimDomains {
					domain := fmt.Sprintf("r%d-d%d.test", round, d)
					if ok, _ := holder.Claim(ctx, CatchAllClaim(domain), "holder", time.Minute); !ok {
						b.Fatal("claim not taken")
					}
					time.AfterFunc(claimDelay, func() { _ = holder.SetCatchAll(ctx, domain, true, time.Minute) })
					for range claimWaiters / claimDomains {
						wg.Go(func() { awaitVerdict(ctx, waiter, domain, mode == "watch") })
					}
				}
				wg.Wait()
			}
			done()
		})
	}
}

// awaitVerdict is one waiter: until the verdict is read (or, as in the
// engine, the claim is its own).
func awaitVerdict(ctx context.Context, f *Fleet, domain string, watch bool) {
	claim := CatchAllClaim(domain)
	var woken <-chan struct{}
	wait, most := 20*time.Millisecond, 2*time.Second
	if watch {
		ch, stop := f.Watch(claim)
		defer stop()
		woken, wait, most = ch, 5*time.Second, 5*time.Second
	}
	for {
		if _, ok, _ := f.CatchAll(ctx, domain); ok {
			return
		}
		if ok, _ := f.Claim(ctx, claim, "waiter", time.Minute); ok {
			return
		}
		t := time.NewTimer(wait/2 + mrand.N(wait))
		select {
		case <-t.C:
		case <-woken:
		}
		t.Stop()
		wait = min(2*wait, most)
	}
}
