package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Redis is the shared Limiter and Learnt on a Redis server. Use it through
// a Fleet, which falls back when Redis cannot be reached.
type Redis struct {
	rdb    *redis.Client
	locks  *redislock.Client
	rates  *redis_rate.Limiter
	prefix string
	id     string        // this process's id in the stale set (markStale)
	ttl    time.Duration // lease TTL
	clk    clock.Clock   // this process's; TTLs and rates run on Redis's own
	st     *counters

	sub *claimSub

	mu     sync.Mutex
	leases map[*Lease]struct{}
}

// BackendError is an error of the backend itself (unreachable, timed out),
// as opposed to the caller's context ending.
type BackendError struct{ Err error }

func (e *BackendError) Error() string { return "fleet backend: " + e.Err.Error() }
func (e *BackendError) Unwrap() error { return e.Err }

// IsBackendError reports whether err is the backend's fault.
func IsBackendError(err error) bool {
	var be *BackendError
	return errors.As(err, &be)
}

// NewRedis connects (lazily) to the Redis server of rawURL. Timeouts are
// short unless the URL sets them (dial_timeout, read_timeout, ...): a
// backend that does not answer within a second is treated as down.
func NewRedis(rawURL string, o Options) (*Redis, error) {
	o.defaults()
	prefix := "emaildata:"
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fleet url: %w", err)
	}
	q := u.Query()
	if q.Has("prefix") {
		prefix = q.Get("prefix")
		q.Del("prefix")
	}
	set := map[string]bool{}
	for k := range q {
		set[k] = true
	}
	u.RawQuery = q.Encode()
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("fleet url %s: %w", Redacted(rawURL), err)
	}
	if !set["dial_timeout"] {
		opt.DialTimeout = time.Second
	}
	if !set["read_timeout"] {
		opt.ReadTimeout = time.Second
	}
	if !set["write_timeout"] {
		opt.WriteTimeout = time.Second
	}
	if !set["pool_timeout"] {
		opt.PoolTimeout = 2 * time.Second
	}
	if !set["max_retries"] {
		opt.MaxRetries = 1
	}
	if !set["dialer_retries"] {
		opt.DialerRetries = 1 // the health checks retry; five dials would stall each one
	}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	rdb := redis.NewClient(opt)
	return &Redis{
		rdb: rdb, locks: redislock.New(rdb), rates: redis_rate.NewLimiter(rdb),
		prefix: prefix, id: newID(), ttl: o.LeaseTTL, clk: clock.Or(o.Clock), st: &counters{}, leases: map[*Lease]struct{}{},
		sub: &claimSub{rdb: rdb, channel: prefix + "claims", clk: clock.Or(o.Clock)},
	}, nil
}

// Close closes the connections.
func (r *Redis) Close() error {
	r.sub.close()
	return r.rdb.Close()
}

// Client is the underlying client (the verification history shares it).
func (r *Redis) Client() *redis.Client { return r.rdb }

// Prefix is the key prefix.
func (r *Redis) Prefix() string { return r.prefix }

// ctxErr prefers the caller's context error to the one a cancelled call
// returned (go-redis reports context errors as its own). While the
// caller's context lives, any error is the backend's, a context error too:
// it is a deadline of the call's own (redislock gives Obtain one of a
// lease TTL when the caller's context has none, and a slow Redis outlasts
// it), which must count as a backend failure, not end the caller's
// Acquire as if its context had (issue 33: "hammer: context deadline
// exceeded" under load).
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		return nil
	}
	return &BackendError{err}
}

func (r *Redis) slotKey(k Key, i int) string {
	return r.prefix + "slot:" + k.String() + ":" + strconv.Itoa(i)
}

// Acquire implements Limiter with lim.Conns lock keys for k, one of which
// the lease holds, refreshed every LeaseTTL/3. When all are taken it
// polls, backing off from 10 ms to 250 ms.
func (r *Redis) Acquire(ctx context.Context, k Key, lim Limits) (*Lease, error) {
	lim = lim.norm()
	start := r.clk.Now()
	waited := false
	backoff := 10 * time.Millisecond
	first := mrand.IntN(lim.Conns)
	for {
		for j := range lim.Conns {
			i := (first + j) % lim.Conns
			lock, err := r.locks.Obtain(ctx, r.slotKey(k, i), r.ttl, nil)
			if errors.Is(err, redislock.ErrNotObtained) {
				continue
			}
			if err != nil {
				r.st.backendErrors.Add(1)
				return nil, ctxErr(ctx, err)
			}
			if waited {
				r.st.leaseWaitNs.Add(int64(r.clk.Since(start)))
			}
			return r.hold(lock), nil
		}
		if !waited {
			waited = true
			r.st.leaseWaits.Add(1)
		}
		d := backoff/2 + time.Duration(mrand.Int64N(int64(backoff)))
		if err := clock.Sleep(ctx, r.clk, d); err != nil {
			r.st.leaseWaitNs.Add(int64(r.clk.Since(start)))
			return nil, err
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// hold wraps lock in a lease refreshed until released; the lease is lost
// when Redis says the key is gone (expired, restarted) or when no refresh
// succeeded for a whole TTL.
func (r *Redis) hold(lock *redislock.Lock) *Lease {
	stop := make(chan struct{})
	l := newLease(time.Time{}, nil)
	l.release = func() {
		close(stop)
		r.forget(l)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = lock.Release(ctx) // an error leaves the key to expire
	}
	r.mu.Lock()
	r.leases[l] = struct{}{}
	r.mu.Unlock()
	go func() {
		t := r.clk.NewTicker(r.ttl / 3)
		defer t.Stop()
		last := r.clk.Now()
		for {
			select {
			case <-stop:
				return
			case <-l.lost:
				return
			case <-t.C():
			}
			ctx, cancel := context.WithTimeout(context.Background(), r.ttl/3)
			err := lock.Refresh(ctx, r.ttl, nil)
			cancel()
			switch {
			case err == nil:
				last = r.clk.Now()
			case errors.Is(err, redislock.ErrNotObtained):
				r.lose(l)
				return
			default:
				r.st.backendErrors.Add(1)
				// Lost at half the TTL without a refresh (the second failed
				// refresh in a row), so the session ends well before the key
				// expires and others' divided budget starts (Fleet).
				if r.clk.Since(last) >= r.ttl/2 {
					r.lose(l)
					return
				}
			}
		}
	}()
	return l
}

func (r *Redis) forget(l *Lease) {
	r.mu.Lock()
	delete(r.leases, l)
	r.mu.Unlock()
}

func (r *Redis) lose(l *Lease) {
	r.forget(l)
	r.st.leasesLost.Add(1)
	l.markLost()
}

// loseAll marks every lease held lost: the backend went away or restarted.
func (r *Redis) loseAll() {
	r.mu.Lock()
	all := make([]*Lease, 0, len(r.leases))
	for l := range r.leases {
		all = append(all, l)
	}
	r.leases = map[*Lease]struct{}{}
	r.mu.Unlock()
	for _, l := range all {
		r.st.leasesLost.Add(1)
		l.markLost()
	}
}

// Wait implements Limiter with redis_rate's GCRA on Redis' clock.
func (r *Redis) Wait(ctx context.Context, k Key, lim Limits) error {
	lim = lim.norm()
	rl := redis_rate.Limit{Rate: 1, Period: time.Duration(float64(time.Second) / lim.Rate), Burst: lim.Burst}
	counted := false
	for {
		res, err := r.rates.Allow(ctx, r.prefix+k.String(), rl)
		if err != nil {
			r.st.backendErrors.Add(1)
			return ctxErr(ctx, err)
		}
		if res.Allowed > 0 {
			return nil
		}
		if !counted {
			counted = true
			r.st.rateWaits.Add(1)
		}
		if err := clock.Sleep(ctx, r.clk, max(res.RetryAfter, time.Millisecond)); err != nil {
			return err
		}
	}
}

// CatchAll implements Learnt.
func (r *Redis) CatchAll(ctx context.Context, domain string) (bool, bool, error) {
	v, err := r.rdb.Get(ctx, r.prefix+"ca:"+domain).Result()
	if errors.Is(err, redis.Nil) {
		return false, false, nil
	}
	if err != nil {
		return false, false, ctxErr(ctx, err)
	}
	return v == "1", true, nil
}

// SetCatchAll implements Learnt, and wakes the waiters of the domain's
// claim (Watch) in the same round trip, after the verdict is stored.
func (r *Redis) SetCatchAll(ctx context.Context, domain string, catchAll bool, ttl time.Duration) error {
	v := "0"
	if catchAll {
		v = "1"
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, r.prefix+"ca:"+domain, v, ttl)
		p.Publish(ctx, r.claimChannel(), CatchAllClaim(domain))
		return nil
	})
	return ctxErr(ctx, err)
}

// Penalty implements Learnt.
func (r *Redis) Penalty(ctx context.Context, k Key) (Penalty, bool, error) {
	v, err := r.rdb.Get(ctx, r.prefix+"pen:"+k.String()).Result()
	if errors.Is(err, redis.Nil) {
		return Penalty{}, false, nil
	}
	if err != nil {
		return Penalty{}, false, ctxErr(ctx, err)
	}
	ms, reason, _ := strings.Cut(v, " ")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return Penalty{Reason: reason, At: time.UnixMilli(n)}, true, nil
}

// SetPenalty implements Learnt.
func (r *Redis) SetPenalty(ctx context.Context, k Key, p Penalty, ttl time.Duration) error {
	if p.At.IsZero() {
		p.At = r.clk.Now()
	}
	v := strconv.FormatInt(p.At.UnixMilli(), 10) + " " + p.Reason
	return ctxErr(ctx, r.rdb.Set(ctx, r.prefix+"pen:"+k.String(), v, ttl).Err())
}

// ClearPenalty implements Learnt.
func (r *Redis) ClearPenalty(ctx context.Context, k Key) error {
	return ctxErr(ctx, r.rdb.Del(ctx, r.prefix+"pen:"+k.String()).Err())
}

// HostLimits implements Learnt.
func (r *Redis) HostLimits(ctx context.Context, k Key) (HostLimits, error) {
	m, err := r.rdb.HGetAll(ctx, r.prefix+"lim:"+k.String()).Result()
	if err != nil {
		return HostLimits{}, ctxErr(ctx, err)
	}
	n := func(f string) int { v, _ := strconv.Atoi(m[f]); return v }
	return HostLimits{
		RcptPerTransaction: n("rcpt_tx"), RcptPerSession: n("rcpt"), RejectsPerSession: n("rejects"),
		RejectsPerTransaction: n("rejects_tx"), NonmailPerSession: n("nonmail"), Conns: n("conns"),
		ConnInterval:   time.Duration(n("interval_ms")) * time.Millisecond,
		ConnsPerWindow: n("window"), Answered: n("answered") > 0,
		ReputationAfter: n("rep_after"), ReputationDelay: time.Duration(n("rep_delay_ms")) * time.Millisecond,
	}, nil
}

// lowerLimits merges learnt limits field by field: caps ("min" fields)
// keep the lowest positive value, spacings ("max") the longest.
var lowerLimits = redis.NewScript(`
local function merge(field, v, keep)
  v = tonumber(v)
  if v <= 0 then return end
  local cur = tonumber(redis.call('HGET', KEYS[1], field))
  if not cur or (keep == 'min' and v < cur) or (keep == 'max' and v > cur) then
    redis.call('HSET', KEYS[1], field, v)
  end
end
merge('rcpt', ARGV[1], 'min')
merge('rejects', ARGV[2], 'min')
merge('conns', ARGV[3], 'min')
merge('interval_ms', ARGV[4], 'max')
merge('rcpt_tx', ARGV[6], 'min')
merge('nonmail', ARGV[7], 'min')
merge('window', ARGV[8], 'min')
merge('answered', ARGV[9], 'max')
merge('rejects_tx', ARGV[10], 'min')
merge('rep_after', ARGV[11], 'min')
merge('rep_delay_ms', ARGV[12], 'max')
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return 1
`)

// LowerHostLimits implements Learnt.
func (r *Redis) LowerHostLimits(ctx context.Context, k Key, h HostLimits, ttl time.Duration) error {
	if ttl <= 0 {
		return nil
	}
	err := lowerLimits.Run(ctx, r.rdb, []string{r.prefix + "lim:" + k.String()},
		h.RcptPerSession, h.RejectsPerSession, h.Conns, h.ConnInterval.Milliseconds(), ttl.Milliseconds(),
		h.RcptPerTransaction, h.NonmailPerSession, h.ConnsPerWindow, b2i(h.Answered), h.RejectsPerTransaction,
		h.ReputationAfter, h.ReputationDelay.Milliseconds()).Err()
	return ctxErr(ctx, err)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// health is what one backend check found.
type health struct {
	epoch    string    // the backend's lifetime id: it changes when Redis lost its data
	resumeAt time.Time // no shared leases before (zero: none pending)
	// lastStale is the latest time a process said it may hold leases the
	// current epoch does not count (markStale); zero: none said so.
	lastStale time.Time
	// stale is how many processes say so now: marked within a LeaseTTL
	// (a process that died is not waited for longer) and not left since
	// (leaveStale).
	stale int
}

// check reads the epoch and the pending resume time in one round trip,
// creating an epoch (and a resume time settle from now, so that holders
// of leases the restart wiped have given them up) when there is none.
func (r *Redis) check(ctx context.Context, settle time.Duration) (health, error) {
	var stale []redis.Z
	var live int64
	read := func() (string, string, error) {
		// The marks are process clocks' times (as the resume time is):
		// the processes of a fleet are expected to agree on the time.
		since := strconv.FormatInt(r.clk.Now().Add(-r.ttl).UnixMilli(), 10)
		pipe := r.rdb.Pipeline()
		e := pipe.Get(ctx, r.prefix+"epoch")
		s := pipe.Get(ctx, r.prefix+"resume")
		z := pipe.ZRevRangeWithScores(ctx, r.prefix+"stale", 0, 0)
		n := pipe.ZCount(ctx, r.prefix+"stale", "("+since, "+inf")
		_, err := pipe.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", "", err
		}
		stale, live = z.Val(), n.Val()
		return e.Val(), s.Val(), nil
	}
	epoch, resume, err := read()
	if err != nil {
		return health{}, ctxErr(ctx, err)
	}
	if epoch == "" {
		// A new backend, or one that restarted without its data.
		if err := r.setResume(ctx, settle); err != nil {
			return health{}, err
		}
		if err := r.rdb.SetNX(ctx, r.prefix+"epoch", newID(), 0).Err(); err != nil {
			return health{}, ctxErr(ctx, err)
		}
		if epoch, resume, err = read(); err != nil {
			return health{}, ctxErr(ctx, err)
		}
	}
	h := health{epoch: epoch, stale: int(live)}
	if len(stale) > 0 {
		h.lastStale = time.UnixMilli(int64(stale[0].Score))
	}
	if ms, err := strconv.ParseInt(resume, 10, 64); err == nil {
		h.resumeAt = time.UnixMilli(ms)
	}
	return h, nil
}

// setResume sets the shared resume time settle from now, unless one is
// pending. The key expires when its time comes, so a later recovery sets
// a new one.
func (r *Redis) setResume(ctx context.Context, settle time.Duration) error {
	at := r.clk.Now().Add(settle).UnixMilli()
	return ctxErr(ctx, r.rdb.SetNX(ctx, r.prefix+"resume", strconv.FormatInt(at, 10), settle).Err())
}

// markStale records that this process may hold leases the current epoch
// does not count (divided ones in the fallback, or shared ones of an epoch
// a restart wiped), so that no process ends a resume pause early
// (Fleet.waivable). The set expires keep after the last mark.
func (r *Redis) markStale(ctx context.Context, keep time.Duration) error {
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, r.prefix+"stale", redis.Z{Score: float64(r.clk.Now().UnixMilli()), Member: r.id})
		p.PExpire(ctx, r.prefix+"stale", keep)
		return nil
	})
	return ctxErr(ctx, err)
}

// leaveStale takes this process out of the stale set: it gave up the last
// lease the epoch does not count.
func (r *Redis) leaveStale(ctx context.Context) error {
	return ctxErr(ctx, r.rdb.ZRem(ctx, r.prefix+"stale", r.id).Err())
}

func (r *Redis) counters() *counters { return r.st }

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// quiet drops go-redis' own log lines (one per failed dial, in its own
// format): failures reach the caller as errors, and the Fleet logs its
// switches through OnMode. go-redis has one logger per process; the fleet
// is its only user here.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// counters are a Fleet's atomic counters.
type counters struct {
	leaseWaits, rateWaits, leasesLost, fallbacks, backendErrors atomic.Uint64
	leaseWaitNs                                                 atomic.Int64
}
