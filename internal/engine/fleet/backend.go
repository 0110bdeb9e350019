package fleet

import (
	"context"
	"time"
)

// fleetBackend is what a Fleet asks of its shared store, through one
// process's client: Redis, or Memory (one process's tests run several
// Fleets on it in simulated time, testing/synctest, where a real server's
// clock cannot be moved).
type fleetBackend interface {
	Limiter
	Learnt
	// check reads the backend's health (epoch, pending resume time, the
	// stale set), creating an epoch and a resume time settle from now
	// when there is none.
	check(ctx context.Context, settle time.Duration) (health, error)
	// setResume sets the shared resume time settle from now, unless one
	// is pending.
	setResume(ctx context.Context, settle time.Duration) error
	// markStale puts this process in the stale set (or renews its mark):
	// it may hold leases the backend does not count. The set expires keep
	// after the last mark.
	markStale(ctx context.Context, keep time.Duration) error
	// leaveStale takes this process out of the stale set: it holds no
	// such lease any more.
	leaveStale(ctx context.Context) error
	// loseAll marks every shared lease this process holds lost.
	loseAll()
	// watchInto sends the backend's wake-ups for claim name to ch.
	watchInto(name string, ch chan struct{}) (stop func())
	counters() *counters
	Close() error
}

var (
	_ fleetBackend = (*Redis)(nil)
	_ fleetBackend = (*memClient)(nil)
)
