package fleet

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emaildata/emaildata/internal/kits/simtime"
	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
)

// eachLearnt runs body on each Learnt implementation, as two processes'
// clients a and b: the in-process one in a synctest bubble, where its
// TTLs run on the bubble's clock and pass lets exactly d go by; Redis on
// the wall clock, where TTLs run on Redis's and pass waits d in real time
// (and Redis's millisecond rounding).
func eachLearnt(t *testing.T, body func(t *testing.T, a, b Learnt, pass func(d time.Duration))) {
	t.Run("local", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := NewLocal(0, nil)
			body(t, l, l, simtime.Advance)
		})
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel() // its own prefix
		url := redisURL(t)
		a, err := NewRedis(url, fastOptions())
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewRedis(url, fastOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(); b.Close() })
		body(t, a, b, realtime.PastTTL)
	})
}

// What one process learns, another reads, until its TTL passes.
func TestLearntSharedWithTTL(t *testing.T) {
	t.Parallel() // the Redis case waits on Redis's TTLs
	ctx := context.Background()
	k := Key{Egress: DefaultEgress, Host: "192.0.2.20:25"}
	eachLearnt(t, func(t *testing.T, w, r Learnt, pass func(time.Duration)) {
		if _, ok, err := r.CatchAll(ctx, "example.test"); ok || err != nil {
			t.Fatalf("catch-all before any lesson: %v %v", ok, err)
		}
		must(t, w.SetCatchAll(ctx, "example.test", true, 300*time.Millisecond))
		must(t, w.SetCatchAll(ctx, "other.test", false, time.Minute))
		if v, ok, err := r.CatchAll(ctx, "example.test"); !ok || !v || err != nil {
			t.Errorf("catch-all = %v %v %v, want true", v, ok, err)
		}
		if v, ok, _ := r.CatchAll(ctx, "other.test"); !ok || v {
			t.Errorf("other.test catch-all = %v %v, want a kept false", v, ok)
		}

		must(t, w.SetPenalty(ctx, k, Penalty{Reason: "no greeting in 30s"}, 300*time.Millisecond))
		p, ok, err := r.Penalty(ctx, k)
		if !ok || err != nil || p.Reason != "no greeting in 30s" || time.Since(p.At) > time.Minute {
			t.Errorf("penalty = %+v %v %v", p, ok, err)
		}

		must(t, w.LowerHostLimits(ctx, k, HostLimits{RcptPerSession: 50, ConnInterval: time.Second}, 300*time.Millisecond))
		must(t, w.LowerHostLimits(ctx, k, HostLimits{RcptPerSession: 80, RejectsPerSession: 4, RejectsPerTransaction: 5, ConnInterval: 200 * time.Millisecond}, 300*time.Millisecond))
		must(t, w.LowerHostLimits(ctx, k, HostLimits{RejectsPerTransaction: 3, ReputationAfter: 3, ReputationDelay: time.Second}, 300*time.Millisecond))
		must(t, w.LowerHostLimits(ctx, k, HostLimits{ReputationAfter: 2, ReputationDelay: 500 * time.Millisecond}, 300*time.Millisecond))
		must(t, w.LowerHostLimits(ctx, k, HostLimits{Conns: 1, ConnInterval: 3 * time.Second, RcptPerTransaction: 20, NonmailPerSession: 9, ConnsPerWindow: 6, Answered: true}, 300*time.Millisecond))
		want := HostLimits{RcptPerSession: 50, RejectsPerSession: 4, RejectsPerTransaction: 3, Conns: 1, ConnInterval: 3 * time.Second, RcptPerTransaction: 20, NonmailPerSession: 9, ConnsPerWindow: 6, Answered: true,
			ReputationAfter: 2, ReputationDelay: time.Second}
		if h, err := r.HostLimits(ctx, k); h != want || err != nil {
			t.Errorf("learnt limits = %+v %v, want %+v (caps keep the lowest, spacings the longest)", h, err, want)
		}

		pass(300 * time.Millisecond)
		if _, ok, _ := r.CatchAll(ctx, "example.test"); ok {
			t.Error("catch-all verdict outlived its TTL")
		}
		if _, ok, _ := r.Penalty(ctx, k); ok {
			t.Error("penalty outlived its TTL")
		}
		if h, _ := r.HostLimits(ctx, k); h != (HostLimits{}) {
			t.Errorf("limits outlived their TTL: %+v", h)
		}
		must(t, w.SetPenalty(ctx, k, Penalty{Reason: "refused"}, time.Minute))
		must(t, w.ClearPenalty(ctx, k))
		if _, ok, _ := r.Penalty(ctx, k); ok {
			t.Error("penalty not cleared")
		}
	})
}

// With the backend away, the lessons stay in the process: nothing learnt
// is lost and reads do not fail.
func TestLearntFallsBackToProcess(t *testing.T) {
	url := "redis://" + closedPort(t) + "/0?prefix=" + testPrefix()
	f, err := Open(context.Background(), url, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	k := Key{Egress: "socks5://10.0.0.1:1080", Host: "192.0.2.21:25"}
	must(t, f.SetCatchAll(ctx, "example.test", true, time.Minute))
	must(t, f.LowerHostLimits(ctx, k, HostLimits{RcptPerSession: 10}, time.Minute))
	if v, ok, err := f.CatchAll(ctx, "example.test"); !v || !ok || err != nil {
		t.Errorf("catch-all in the fallback = %v %v %v", v, ok, err)
	}
	if h, err := f.HostLimits(ctx, k); h.RcptPerSession != 10 || err != nil {
		t.Errorf("limits in the fallback = %+v %v", h, err)
	}
}

func TestEgressForProxy(t *testing.T) {
	for in, want := range map[string]string{
		"socks5://user:secret@proxy.example:1080": "socks5://proxy.example:1080",
		"socks5://10.0.0.1:1080":                  "socks5://10.0.0.1:1080",
		"::":                                      "proxy",
	} {
		if got := EgressForProxy(in); got != want {
			t.Errorf("EgressForProxy(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenRejectsBadURL(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:6379", "redis://127.0.0.1:6379/notadb", "::"} {
		if f, err := Open(context.Background(), u, fastOptions()); err == nil {
			f.Close()
			t.Errorf("Open(%q) accepted", u)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
