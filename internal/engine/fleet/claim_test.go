package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A claim goes to one holder of many asking at once; the holder takes it
// again (renewing it), others do not until it is given up or expires.
func TestClaimOneHolder(t *testing.T) {
	t.Parallel() // the Redis case waits on Redis's TTLs
	ctx := context.Background()
	eachLearnt(t, func(t *testing.T, a, b Learnt, pass func(time.Duration)) {
		pair := [2]Learnt{a, b}
		var won atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			l := pair[i%2] // two processes' clients
			holder := "holder-" + string(rune('a'+i))
			wg.Go(func() {
				ok, err := l.Claim(ctx, "catchall:one.test", holder, 300*time.Millisecond)
				if err != nil {
					t.Error(err)
				}
				if ok {
					won.Add(1)
				}
			})
		}
		wg.Wait()
		if n := won.Load(); n != 1 {
			t.Fatalf("%d holders won the claim at once, want 1", n)
		}

		claim := func(l Learnt, holder string, ttl time.Duration) bool {
			ok, err := l.Claim(ctx, "catchall:two.test", holder, ttl)
			must(t, err)
			return ok
		}
		if !claim(a, "h1", 300*time.Millisecond) || claim(b, "h2", time.Minute) {
			t.Fatal("first claim lost, or a second holder took a held claim")
		}
		if !claim(b, "h1", 300*time.Millisecond) {
			t.Fatal("the holder could not renew its claim")
		}
		must(t, b.Unclaim(ctx, "catchall:two.test", "h2")) // not its claim: nothing
		if claim(a, "h2", time.Minute) {
			t.Fatal("another holder's Unclaim freed the claim")
		}
		pass(300 * time.Millisecond)
		if !claim(b, "h2", time.Minute) {
			t.Fatal("the claim outlived its TTL")
		}
		must(t, a.Unclaim(ctx, "catchall:two.test", "h2"))
		if !claim(a, "h3", time.Minute) {
			t.Fatal("the claim was not given up")
		}
	})
}

// With the backend away a Fleet claims in the process: never an error,
// never a wait, still one holder.
func TestClaimFallsBackToProcess(t *testing.T) {
	url := "redis://" + closedPort(t) + "/0?prefix=" + testPrefix()
	f, err := Open(context.Background(), url, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	a, errA := f.Claim(ctx, "catchall:down.test", "a", time.Minute)
	b, errB := f.Claim(ctx, "catchall:down.test", "b", time.Minute)
	if !a || b || errA != nil || errB != nil {
		t.Fatalf("claims in the fallback: %v %v (%v %v), want the first only", a, b, errA, errB)
	}
	// Not waiting means not waiting for the backend: the claims end well
	// inside the second's context (a tighter wall-time bound would fail on
	// a loaded CI machine, not on a wait).
	if ctx.Err() != nil {
		t.Fatalf("claims in the fallback took %v: they waited for the backend", time.Since(start))
	}
	// Its waiters are the process's own, woken by the holder giving up.
	woke, stop := f.Watch(CatchAllClaim("down.test"))
	defer stop()
	must(t, f.Unclaim(ctx, "catchall:down.test", "a"))
	woken(t, woke, "unclaim in the fallback")
}
