package fleet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emaildata/emaildata/internal/kits/testkit/realtime"
)

// The test binary doubles as the "other processes" of the fleet tests:
// with FLEET_CHILD set it runs one holder and exits.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FLEET_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	// The parallel tests (ten with the subtests) wait on Redis's TTLs,
	// leases and health intervals on the wall clock: eight at a time,
	// not two.
	realtime.WaitingParallel(8)
	os.Exit(m.Run())
}

func envInt(name string) int { v, _ := strconv.Atoi(os.Getenv(name)); return v }

// child runs as another process: "hammer" acquires, waits and holds for
// FLEET_SECONDS and prints its spans; "hold" takes FLEET_CONNS slots,
// says "held" and sleeps until killed.
func child(mode string) int {
	ctx := context.Background()
	f, err := Open(ctx, os.Getenv("FLEET_URL"), fastOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	k := Key{Egress: DefaultEgress, Host: "192.0.2.1:25"}
	lim := Limits{Conns: envInt("FLEET_CONNS"), Rate: float64(envInt("FLEET_RATE"))}
	switch mode {
	case "hammer":
		rctx, cancel := context.WithTimeout(ctx, time.Duration(envInt("FLEET_MS"))*time.Millisecond)
		defer cancel()
		var rec recorder
		if err := hammer(rctx, f, k, lim, 30*time.Millisecond, &rec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, s := range rec.spans {
			fmt.Printf("%d %d %d\n", s.from.UnixNano(), s.to.UnixNano(), s.start.UnixNano())
		}
		return 0
	case "hold":
		for range lim.Conns {
			if _, err := f.Acquire(ctx, k, lim); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		fmt.Println("held")
		select {}
	}
	return 2
}

func spawn(t *testing.T, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"FLEET_CHILD=" + mode}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// ready opens a Fleet on url and waits until it hands out leases (a new
// prefix starts with a resume time, as a restarted backend does).
func ready(t *testing.T, url string, o Options) *Fleet {
	t.Helper()
	f, err := Open(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := f.Acquire(ctx, Key{Egress: DefaultEgress, Host: "198.51.100.1:25"}, Limits{Conns: 1, Rate: 100})
	if err != nil {
		t.Fatalf("first lease: %v", err)
	}
	l.Release()
	if m := f.Mode(); m != ModeShared {
		t.Fatalf("mode %s, want shared", m)
	}
	return f
}

// Several processes sharing the backend never hold more than the host's
// connections at once, nor start more than its rate (plus the burst) in
// any second.
func TestProcessesShareHostLimits(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	ready(t, url, fastOptions())
	const procs, conns, rate = 4, 2, 10
	var (
		mu    sync.Mutex
		spans []span
		wg    sync.WaitGroup
	)
	for range procs {
		cmd := spawn(t, "hammer", "FLEET_URL="+url, "FLEET_MS=1500",
			"FLEET_CONNS="+strconv.Itoa(conns), "FLEET_RATE="+strconv.Itoa(rate))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			var mine []span
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 {
					continue
				}
				n := func(s string) time.Time { v, _ := strconv.ParseInt(s, 10, 64); return time.Unix(0, v) }
				mine = append(mine, span{from: n(f[0]), to: n(f[1]), start: n(f[2])})
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("child: %v", err)
			}
			mu.Lock()
			spans = append(spans, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(spans) < 10 {
		t.Fatalf("only %d connections in all: the processes made no progress", len(spans))
	}
	if got := maxConcurrent(spans); got > conns {
		t.Errorf("%d connections open at once over %d processes, limit %d", got, procs, conns)
	}
	// GCRA allows the burst plus the rate in any second (a little less
	// than a second absorbs the processes' reporting jitter).
	if got := maxStartsIn(spans, 980*time.Millisecond); got > rate+conns {
		t.Errorf("%d new connections within a second, limit %d/s with a burst of %d", got, rate, conns)
	}
	t.Logf("%d processes, %d connections, most at once %d, most starts in a second %d",
		procs, len(spans), maxConcurrent(spans), maxStartsIn(spans, time.Second))
}

// A process killed while holding every slot frees them within the lease
// TTL.
func TestKilledHolderFreesSlots(t *testing.T) {
	t.Parallel()
	url := redisURL(t)
	f := ready(t, url, fastOptions())
	cmd := spawn(t, "hold", "FLEET_URL="+url, "FLEET_CONNS=2", "FLEET_RATE=100")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("child did not take the slots: %q %v", line, err)
	}
	k := Key{Egress: DefaultEgress, Host: "192.0.2.1:25"}
	lim := Limits{Conns: 2, Rate: 100}
	// While the child lives (and refreshes), the slots stay taken.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	if l, err := f.Acquire(ctx, k, lim); err == nil {
		l.Release()
		t.Fatal("got a slot while another process held every one (past the lease TTL: refresh broken?)")
	}
	cancel()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 2 {
		l, err := f.Acquire(ctx, k, lim)
		if err != nil {
			t.Fatalf("slots not freed %v after kill -9: %v", time.Since(killed), err)
		}
		defer l.Release()
	}
	// Within seconds, as the issue asks: the 5 s above (a slot never freed
	// fails there). The lease TTL runs on Redis's clock and the waiter's
	// tries on a loaded machine's, so the time is reported, not bounded
	// tighter.
	t.Logf("both slots free %v after kill -9 (lease TTL %v)", time.Since(killed).Round(time.Millisecond), fastOptions().LeaseTTL)
}
