package fleet

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// woken waits for a wake-up; the timeout only ends a failing test.
func woken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no wake-up", what)
	}
}

// A claim's waiters in another process are woken by its holder's verdict
// and by its holder giving it up; another holder's Unclaim frees nothing
// and so wakes no one before the holder's own.
func TestWatchWakesOnVerdictAndUnclaim(t *testing.T) {
	ctx := context.Background()
	eachLearnt(t, func(t *testing.T, holder, waiter Learnt, _ func(time.Duration)) {
		for i, end := range []struct {
			what string
			do   func(claim string) error
		}{
			{"verdict", func(string) error { return holder.SetCatchAll(ctx, "w0.test", true, time.Minute) }},
			{"unclaim", func(claim string) error {
				must(t, holder.Unclaim(ctx, claim, "not-the-holder"))
				return holder.Unclaim(ctx, claim, "h")
			}},
		} {
			claim := CatchAllClaim("w" + string(rune('0'+i)) + ".test")
			if ok, err := holder.Claim(ctx, claim, "h", time.Minute); !ok || err != nil {
				t.Fatalf("claim: %v %v", ok, err)
			}
			ch, stop := waiter.Watch(claim)
			must(t, end.do(claim))
			woken(t, ch, end.what)
			stop()
		}
		if ok, _ := waiter.Claim(ctx, CatchAllClaim("w1.test"), "w", time.Minute); !ok {
			t.Fatal("the claim given up is still held")
		}
	})
}

// countingHook counts a client's commands and new connections.
type countingHook struct{ cmds, dials atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// A process's waiters share one subscription: once the first waits,
// more waiters cost no Redis command and no connection, Redis counts one
// subscriber, and each waiter is woken by its own claim's verdict.
func TestWatchOneSubscriptionForManyWaiters(t *testing.T) {
	ctx := context.Background()
	url := redisURL(t)
	holder, err := NewRedis(url, fastOptions())
	must(t, err)
	waiter, err := NewRedis(url, fastOptions())
	must(t, err)
	t.Cleanup(func() { holder.Close(); waiter.Close() })
	var hook countingHook
	waiter.Client().AddHook(&hook)

	_, stop := waiter.Watch(CatchAllClaim("first.test"))
	defer stop()
	cmds, dials := hook.cmds.Load(), hook.dials.Load()
	if dials == 0 {
		t.Fatal("the first waiter's subscription dialled nothing the hook saw: the counts below cannot tell")
	}
	const names, per = 10, 20
	var chans [names][per]<-chan struct{}
	for n := range names {
		for i := range per {
			ch, stop := waiter.Watch(CatchAllClaim(domainN(n)))
			defer stop()
			chans[n][i] = ch
		}
	}
	if c, d := hook.cmds.Load()-cmds, hook.dials.Load()-dials; c != 0 || d != 0 {
		t.Fatalf("%d more waiters cost %d commands and %d connections, want none", names*per, c, d)
	}
	subs, err := holder.Client().PubSubNumSub(ctx, holder.claimChannel()).Result()
	must(t, err)
	if n := subs[holder.claimChannel()]; n != 1 {
		t.Fatalf("%d subscribers for %d waiters in one process, want 1", n, names*per+1)
	}
	for n := range names {
		must(t, holder.SetCatchAll(ctx, domainN(n), n%2 == 0, time.Minute))
	}
	for n := range names {
		for i := range per {
			woken(t, chans[n][i], domainN(n))
		}
	}
	if c, d := hook.cmds.Load()-cmds, hook.dials.Load()-dials; c != 0 || d != 0 {
		t.Fatalf("waking %d waiters cost the waiting process %d commands and %d connections, want none", names*per, c, d)
	}
}

func domainN(n int) string { return "many" + string(rune('a'+n)) + ".test" }
