package fleet

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

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

func benchFleet(b *testing.B) (*Fleet, *roundTrips) {
	url := redisURL(b)
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
	l := NewLocal(0)
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
