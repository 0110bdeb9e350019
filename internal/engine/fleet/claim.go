package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// claimSweep is the number of in-process claims above which expired ones
// are dropped on the next Claim.
const claimSweep = 4096

type localClaim struct {
	holder  string
	expires time.Time
}

// Claim implements Learnt with an in-process map: it keeps Probers that
// share one Local (or a Fleet in fallback) to one holder.
func (l *Local) Claim(_ context.Context, name, holder string, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.claims == nil {
		l.claims = map[string]localClaim{}
	}
	if c, ok := l.claims[name]; ok && c.holder != holder && now.Before(c.expires) {
		return false, nil
	}
	if len(l.claims) >= claimSweep {
		for n, c := range l.claims {
			if !now.Before(c.expires) {
				delete(l.claims, n)
			}
		}
	}
	l.claims[name] = localClaim{holder: holder, expires: now.Add(ttl)}
	return true, nil
}

// Unclaim implements Learnt.
func (l *Local) Unclaim(_ context.Context, name, holder string) error {
	l.mu.Lock()
	c, ok := l.claims[name]
	ok = ok && c.holder == holder
	if ok {
		delete(l.claims, name)
	}
	l.mu.Unlock()
	if ok {
		l.watch.wake(name)
	}
	return nil
}

func (r *Redis) claimKey(name string) string { return r.prefix + "claim:" + name }

// claimToken makes holder names one length: redislock takes a key back for
// a holder whose token is the stored value's prefix of that length.
func claimToken(holder string) string {
	sum := sha256.Sum256([]byte(holder))
	return hex.EncodeToString(sum[:16])
}

// Claim implements Learnt with redislock's SET NX PX (a holder's own key
// is set again with its new TTL).
func (r *Redis) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	_, err := r.locks.Obtain(ctx, r.claimKey(name), max(ttl, time.Millisecond), &redislock.Options{Token: claimToken(holder)})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redislock.ErrNotObtained):
		return false, nil
	}
	return false, ctxErr(ctx, err)
}

// unclaim deletes a claim key only while holder's token is its value, and
// then wakes its waiters (Watch): ARGV[2] is the claim channel, ARGV[3]
// the claim's name.
var unclaim = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("del", KEYS[1])
  redis.call("publish", ARGV[2], ARGV[3])
  return 1
end
return 0`)

// Unclaim implements Learnt.
func (r *Redis) Unclaim(ctx context.Context, name, holder string) error {
	return ctxErr(ctx, unclaim.Run(ctx, r.rdb, []string{r.claimKey(name)}, claimToken(holder), r.claimChannel(), name).Err())
}

// Claim implements Learnt: the backend's claim while it answers; the
// in-process one in the fallback or when the call fails, so that a claim
// never waits on a backend that is gone.
func (f *Fleet) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if l := f.learnt(); l != Learnt(f.local) {
		ok, err := l.Claim(ctx, name, holder, ttl)
		if err == nil {
			return ok, nil
		}
		f.noteError(err)
		if !IsBackendError(err) {
			return false, err
		}
	}
	return f.local.Claim(ctx, name, holder, ttl)
}

// Unclaim implements Learnt.
func (f *Fleet) Unclaim(ctx context.Context, name, holder string) error {
	_ = f.local.Unclaim(ctx, name, holder)
	return f.shared(func(l Learnt) error { return l.Unclaim(ctx, name, holder) })
}
