// Package realtime is a test kit: the waits of tests that run on the wall
// clock against real servers and processes (Redis, a child process, a
// relay cut and restored), whose own clocks no test can simulate: a key's
// TTL runs on Redis's clock, another process's write arrives when it does.
//
// The engine's own timing (greylisting, backoffs, rates, leases, DNS
// retransmission) is tested in simulated time instead (testing/synctest,
// internal/kits/simtime), and its tests do not sleep; the sleeps that are
// left are here, in one place, each the wait for something real.
package realtime

import (
	"context"
	"flag"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// pollEvery is how often a condition on a real server is checked.
const pollEvery = 10 * time.Millisecond

// Eventually checks cond until it holds, and fails the test if it still
// does not after within: for state a real server or process reaches on
// its own (a lesson written by another client, a server back up).
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if !Until(ctx, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// Until checks cond until it holds (true) or ctx ends (false): Eventually
// for a goroutine other than the test's.
func Until(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return cond()
		case <-time.After(pollEvery):
		}
	}
	return true
}

// PastTTL waits until what a real server stored with ttl before the call
// has expired on the server's clock: ttl and a few milliseconds (Redis
// keeps expiry times in milliseconds).
func PastTTL(ttl time.Duration) {
	time.Sleep(ttl + 5*time.Millisecond)
}

// Let lets d pass on the wall clock while real servers and processes do
// their part (a test's load running against a real Redis while it is cut
// and restored): the simulated-time test's simtime.Advance, for a world
// no bubble holds.
func Let(d time.Duration) {
	time.Sleep(d)
}

// WaitingParallel is for a test package's TestMain, before m.Run: unless
// -test.parallel was given, up to n of its parallel tests run at once
// instead of GOMAXPROCS (2 on the project's machines). For packages
// whose parallel tests spend their time waiting on real servers' clocks
// (Redis's TTLs, a lease running out, a child process), not on the CPU:
// at GOMAXPROCS such tests queue behind each other's waits (issue 33).
func WaitingParallel(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && n > runtime.GOMAXPROCS(0) {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
