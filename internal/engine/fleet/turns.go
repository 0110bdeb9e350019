package fleet

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/emaildata/emaildata/internal/platform/clock"
)

// Share is one process's seat among n processes that divide each host's
// budget without a backend: the pods of one list (seat = the Job's
// completion index, which never runs twice at once; seats = the list's
// shards).
type Share struct {
	Seat, Seats int
	// Turn is the length of a turn when seats take turns (default 10s).
	Turn time.Duration
	// Skew is the clock difference allowed between processes (default
	// 250ms): a turn's first and last Skew are left unused.
	Skew time.Duration
}

func (s Share) norm() Share {
	if s.Seats < 1 {
		s.Seats = 1
	}
	if s.Seat < 0 || s.Seat >= s.Seats {
		s.Seat = 0
	}
	if s.Turn <= 0 {
		s.Turn = 10 * time.Second
	}
	if s.Skew <= 0 {
		s.Skew = 250 * time.Millisecond
	}
	if s.Skew > s.Turn/8 {
		s.Skew = s.Turn / 8
	}
	return s
}

// Turns divides each host's budget among the seats of a Share, exactly,
// without talking to anyone:
//
// A host's Conns connections are lanes (min(Conns, seats) of them); seat s
// is in lane s mod lanes. A lane has conns/lanes connections (the first
// Conns mod lanes lanes one more) and the same fraction of the rate and
// burst. When a lane has one seat, that seat holds its share at all times;
// when it has several, they take turns of Share.Turn, in rotation (the
// rotation's phase differs per host, so a process always has some hosts'
// turns). A turn's leases end Share.Skew before it does and the next turn
// starts using the lane Share.Skew after it began, with its rate bucket
// empty, so lanes never overlap while clocks agree within Skew; and the
// lanes' connections, rates and bursts add up to the host's budget.
type Turns struct {
	share Share
	clk   clock.Clock
	now   func() time.Time
	local *Local // the lanes' slots when a seat holds its lane alone

	mu    sync.Mutex
	lanes map[Key]*laneRate
}

type laneRate struct {
	turn int64
	lim  *rate.Limiter
}

// NewTurns returns the divided budget of share, timed on clk (nil: the
// wall clock).
func NewTurns(share Share, clk clock.Clock) *Turns {
	clk = clock.Or(clk)
	return &Turns{share: share.norm(), clk: clk, now: clk.Now, local: NewLocal(0, clk), lanes: map[Key]*laneRate{}}
}

var _ Limiter = (*Turns)(nil)

// Share returns the share (with defaults).
func (t *Turns) Share() Share { return t.share }

// lane is seat's part of lim.
type lane struct {
	lim   Limits // the lane's conns, rate and burst
	seats int    // seats in the lane (1: no turns)
	pos   int    // this seat's place in the rotation
}

func (t *Turns) lane(lim Limits) lane {
	lim = lim.norm()
	n, s := t.share.Seats, t.share.Seat
	lanes := min(lim.Conns, n)
	j := s % lanes
	conns := lim.Conns / lanes
	if j < lim.Conns%lanes {
		conns++
	}
	return lane{
		lim: Limits{
			Conns: conns,
			Rate:  lim.Rate * float64(conns) / float64(lim.Conns),
			Burst: max(1, lim.Burst*conns/lim.Conns),
		},
		seats: (n - j + lanes - 1) / lanes,
		pos:   s / lanes,
	}
}

// window is one turn of a host: its number and the span this seat may use.
type window struct {
	turn       int64
	start, end time.Time // usable span: the turn less Skew at both ends
}

// window returns the turn of k at now and whether it is this seat's.
func (t *Turns) window(k Key, ln lane, now time.Time) (window, bool) {
	turn := t.share.Turn
	off := time.Duration(hashKey(k) % uint64(turn))
	n := now.Add(off).UnixNano() / int64(turn)
	begin := time.Unix(0, n*int64(turn)).Add(-off)
	w := window{turn: n, start: begin.Add(t.share.Skew), end: begin.Add(turn - t.share.Skew)}
	return w, n%int64(ln.seats) == int64(ln.pos)
}

// nextStart is when this seat's next usable span of k begins after now.
func (t *Turns) nextStart(k Key, ln lane, now time.Time) time.Time {
	w, mine := t.window(k, ln, now)
	if mine && now.Before(w.start) {
		return w.start
	}
	ahead := (int64(ln.pos) - w.turn%int64(ln.seats) + int64(ln.seats)) % int64(ln.seats)
	if ahead == 0 {
		ahead = int64(ln.seats)
	}
	return w.start.Add(time.Duration(ahead) * t.share.Turn)
}

// minLease is the least time left in a turn worth starting a session in.
func (t *Turns) minLease() time.Duration { return min(time.Second, t.share.Turn/4) }

// Acquire implements Limiter: at once (or when a slot frees) in a lane of
// its own; in this seat's turns otherwise, with a lease that ends with the
// turn (Deadline, and Lost closes then).
func (t *Turns) Acquire(ctx context.Context, k Key, lim Limits) (*Lease, error) {
	ln := t.lane(lim)
	if ln.seats == 1 {
		return t.local.Acquire(ctx, k, ln.lim)
	}
	for {
		now := t.now()
		w, mine := t.window(k, ln, now)
		// At exactly minLease left the deadline below has passed already:
		// wait for the next turn rather than try again at the same instant.
		if !mine || now.Before(w.start) || w.end.Sub(now) <= t.minLease() {
			if err := clock.SleepUntil(ctx, t.clk, t.nextStart(k, ln, now)); err != nil {
				return nil, err
			}
			continue
		}
		tctx, cancel := context.WithDeadline(ctx, w.end.Add(-t.minLease()))
		inner, err := t.local.Acquire(tctx, k, ln.lim)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue // the turn ran out while slots were busy
		}
		l := newLease(w.end, inner.Release)
		stop := t.clk.AfterFunc(t.clk.Until(w.end), l.markLost)
		l.release = func() { stop.Stop(); inner.Release() }
		return l, nil
	}
}

// Wait implements Limiter: the lane's rate, within this seat's turns, with
// a bucket that starts each turn empty.
func (t *Turns) Wait(ctx context.Context, k Key, lim Limits) error {
	ln := t.lane(lim)
	if ln.seats == 1 {
		return t.local.Wait(ctx, k, ln.lim)
	}
	for {
		now := t.now()
		w, mine := t.window(k, ln, now)
		if !mine || now.Before(w.start) || !now.Before(w.end) {
			if err := clock.SleepUntil(ctx, t.clk, t.nextStart(k, ln, now)); err != nil {
				return err
			}
			continue
		}
		r := t.laneRate(k, ln, w, now).ReserveN(now, 1)
		if !r.OK() {
			return context.DeadlineExceeded // burst below 1: cannot happen with norm
		}
		at := now.Add(r.DelayFrom(now))
		if at.Before(w.end) {
			return clock.SleepUntil(ctx, t.clk, at)
		}
		r.CancelAt(now)
		if err := clock.SleepUntil(ctx, t.clk, w.end); err != nil {
			return err
		}
	}
}

func (t *Turns) laneRate(k Key, ln lane, w window, now time.Time) *rate.Limiter {
	t.mu.Lock()
	defer t.mu.Unlock()
	lr := t.lanes[k]
	if lr == nil || lr.turn != w.turn {
		if len(t.lanes) > 4096 {
			for key, v := range t.lanes {
				if v.turn < w.turn-1 {
					delete(t.lanes, key)
				}
			}
		}
		lim := rate.NewLimiter(rate.Limit(ln.lim.Rate), ln.lim.Burst)
		lim.AllowN(now, ln.lim.Burst) // empty: the previous seat's bucket is unknown
		lr = &laneRate{turn: w.turn, lim: lim}
		t.lanes[k] = lr
	}
	return lr.lim
}

func hashKey(k Key) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k.Egress))
	h.Write([]byte{0})
	h.Write([]byte(k.Host))
	return h.Sum64()
}
