package fleet

import (
	"context"
	"sync"
	"testing"
	"time"
)

// lostInWait is a Limiter whose first lease is lost while its holder
// waits for the rate (as a Fleet's shared lease at a switch to the
// fallback), and whose first Wait lasts until its context ends.
type lostInWait struct {
	mu       sync.Mutex
	leases   []*Lease
	released []int
}

func (f *lostInWait) Acquire(ctx context.Context, k Key, lim Limits) (*Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.leases)
	l := newLease(time.Time{}, func() {
		f.mu.Lock()
		f.released = append(f.released, i)
		f.mu.Unlock()
	})
	f.leases = append(f.leases, l)
	return l, nil
}

func (f *lostInWait) Wait(ctx context.Context, k Key, lim Limits) error {
	f.mu.Lock()
	first := len(f.leases) == 1
	l := f.leases[len(f.leases)-1]
	f.mu.Unlock()
	if first {
		l.markLost()
		<-ctx.Done() // Take ends the wait once the lease is lost
		return ctx.Err()
	}
	return nil
}

// TestTakeGivesUpLeaseLostInWait (issue 33): a lease lost while its
// holder waits for the rate is released, the wait cut short, and the
// connection has a new lease: none starts on the lost one.
func TestTakeGivesUpLeaseLostInWait(t *testing.T) {
	f := &lostInWait{}
	l, err := Take(context.Background(), f, Key{Egress: DefaultEgress, Host: "192.0.2.25:25"}, Limits{Conns: 1, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.leases) != 2 || l != f.leases[1] {
		t.Fatalf("%d leases taken, got the %v one; want the second of 2", len(f.leases), l == f.leases[0])
	}
	if len(f.released) != 1 || f.released[0] != 0 {
		t.Errorf("released %v before the connection, want the lost lease (0)", f.released)
	}
}
