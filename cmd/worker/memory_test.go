package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets a test run this binary as the worker command in a child
// process (WORKER_TEST_MAIN=1), so that its peak RSS is its own. The child
// writes its peak RSS (VmHWM, of its own address space) to
// WORKER_TEST_HWM: rusage's Maxrss of a child started with vfork, as
// os/exec does, can include the parent's RSS at the fork.
func TestMain(m *testing.M) {
	if os.Getenv("WORKER_TEST_MAIN") == "1" {
		code := run(context.Background(), os.Args[1:], os.Stderr)
		if status, err := os.ReadFile("/proc/self/status"); err == nil {
			for _, l := range strings.Split(string(status), "\n") {
				if strings.HasPrefix(l, "VmHWM:") {
					_ = os.WriteFile(os.Getenv("WORKER_TEST_HWM"), []byte(strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))), 0o644)
				}
			}
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// writeRepeatingList writes n distinct addresses then the first half of
// them again in another order, upper-cased or padded, so that repeats span
// every shard boundary; it returns the path.
func writeRepeatingList(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("list-%d.csv", n))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "id,name,email")
	for i := range n {
		fmt.Fprintf(w, "%d,\"Doe, %d\",user%d@example%d.com\n", i, i, i, i%5)
	}
	for j, i := range rand.New(rand.NewPCG(1, 2)).Perm(n / 2) {
		a := fmt.Sprintf("user%d@example%d.com", i, i%5)
		if j%2 == 0 {
			a = " " + strings.ToUpper(a)
		}
		fmt.Fprintf(w, "%d,name,%s\n", n+j, a)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}

// runChild runs `worker run` offline in a child process (its store under
// in's directory, the configuration offline plus conf) and returns its
// peak RSS in MiB.
func runChild(t *testing.T, in, out, conf string, extra ...string) float64 {
	t.Helper()
	t.Setenv("TMPDIR", filepath.Dir(in))
	args := append([]string{"run", "--in", in, "--out", out, "--delimiter", "comma", "--header", "--email-column", "3",
		configArg(t, offlineBody+conf), "--progress", "0"}, extra...)
	return childRSS(t, args...)
}

// TestRunMemoryBounded: the peak RSS of `worker run` does not grow with
// the list. A list 2.7 times longer (1.2M rows, 50 MB, 50 shards, four at
// once, the duplicate search spilling sorted runs) peaks within 32 MiB of
// the short one (GC timing; by hand, 1M and 8M rows peak at 138 and 139
// MB with these flags) and under a fixed bound, and its duplicate flags match
// a single-pass reference. Before duplicates were found at preparation,
// each shard kept the addresses of every row before it (and worker run
// kept the whole list and its parts in memory): peak RSS grew with the
// list (665 MB at 1M rows, 3 GB at 8M).
func TestRunMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 50 MB list")
	}
	dir := t.TempDir()
	// GOGC=100 (Go's default, not worker run's 200): growth with the
	// list shows through less GC headroom and timing; the default's extra
	// headroom is bounded by its memory limit (docs/benchmarks.md).
	t.Setenv("GOGC", "100")
	const conf = "pipeline:\n  shardBytes: 1000000\n  dedupMemory: 4000000\n"
	small := writeRepeatingList(t, dir, 300_000)
	smallRSS := runChild(t, small, filepath.Join(dir, "small.csv"), conf, "--parallel", "4")
	big := writeRepeatingList(t, dir, 800_000)
	bigOut := filepath.Join(dir, "big.csv")
	bigRSS := runChild(t, big, bigOut, conf, "--parallel", "4")
	t.Logf("peak RSS: %.0f MiB at 450k rows, %.0f MiB at 1.2M rows", smallRSS, bigRSS)
	const bound = 160 // MiB: the engine (about 50) and a bounded working set
	if bigRSS > bound || bigRSS > smallRSS+32 {
		t.Errorf("peak RSS %.0f MiB at 1.2M rows (%.0f MiB at 450k): want under %d MiB and within 32 MiB of the short list's", bigRSS, smallRSS, bound)
	}
	checkRepeatFlags(t, big, bigOut)
	if left, _ := filepath.Glob(filepath.Join(dir, "worker-run-*")); len(left) > 0 {
		t.Errorf("worker run left its store behind: %v", left)
	}
}

// checkRepeatFlags compares ev_duplicate with one map of every address
// seen, trimmed and lower-cased, in row order.
func checkRepeatFlags(t *testing.T, in, out string) {
	t.Helper()
	inRows, outRows := readCSV(t, in), readCSV(t, out)
	if len(inRows) != len(outRows) {
		t.Fatalf("%d result rows for %d input rows", len(outRows), len(inRows))
	}
	dup := -1
	for i, h := range outRows[0] {
		if h == "ev_duplicate" {
			dup = i
		}
	}
	seen := map[string]bool{}
	repeats := 0
	for i := 1; i < len(inRows); i++ {
		k := strings.ToLower(strings.TrimSpace(inRows[i][2]))
		want := fmt.Sprint(seen[k])
		seen[k] = true
		if want == "true" {
			repeats++
		}
		if got := outRows[i][dup]; got != want {
			t.Fatalf("row %d %q: ev_duplicate %s, want %s", i, inRows[i][2], got, want)
		}
	}
	if repeats == 0 {
		t.Fatal("no repeats in the list: the check proves nothing")
	}
}

// childRSS runs the worker command with args in a child process and
// returns its peak RSS in MiB.
func childRSS(t *testing.T, args ...string) float64 {
	t.Helper()
	hwm := filepath.Join(t.TempDir(), "hwm")
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WORKER_TEST_MAIN=1", "WORKER_TEST_HWM="+hwm)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("worker %s: %v\n%s", args[0], err, b)
	}
	v, err := os.ReadFile(hwm)
	if err != nil {
		t.Fatalf("the child did not report its peak RSS: %v", err)
	}
	var kb float64
	if _, err := fmt.Sscanf(string(v), "%f kB", &kb); err != nil {
		t.Fatalf("peak RSS %q: %v", v, err)
	}
	return kb / 1024
}

// TestShardMemoryFlat: on the Job path, the last shard of a long list
// needs no more memory than the first. It used to read and remember every
// row before it, so a worker pod of a late shard outgrew its limit.
func TestShardMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("prepares a 50 MB list")
	}
	path := writeRepeatingList(t, t.TempDir(), 800_000)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const uid = "big"
	url, plan := prepareFileStore(t, uid, string(data), 4<<20)
	last := len(plan.Shards) - 1
	if last < 8 || plan.Repeats[last] == 0 {
		t.Fatalf("%d shards, %v repeats: want many, and repeats in the last", len(plan.Shards), plan.Repeats)
	}
	rss := map[int]float64{}
	for _, i := range []int{0, last} {
		rss[i] = childRSS(t, "shard", "--list-uid", uid, "--blob-url", url, "--index", fmt.Sprint(i), offline(t))
		if s := readSummary(t, url, uid, i); s.Rows != plan.Shards[i].Rows || s.Error != "" {
			t.Fatalf("shard %d summary %+v", i, s)
		}
	}
	t.Logf("peak RSS: shard 0 %.0f MiB, shard %d (after %d rows) %.0f MiB", rss[0], last, plan.Shards[last].FirstRow, rss[last])
	if rss[last] > 128 || rss[last] > rss[0]+16 {
		t.Errorf("shard %d peaks at %.0f MiB, shard 0 at %.0f MiB: want under 128 MiB and within 16 MiB", last, rss[last], rss[0])
	}
}

// worker run reads its input through a relative symlink, and from another
// directory than its store's (a copy when it cannot hard-link).
func TestRunLocalInputLinks(t *testing.T) {
	dir := t.TempDir()
	data := []byte("email\nann@example.com\nANN@example.com\n")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "data"), "list.csv", data)
	if err := os.Symlink("data/list.csv", filepath.Join(dir, "link.csv")); err != nil {
		t.Fatal(err)
	}
	for _, tmp := range []string{dir, "/dev/shm"} {
		if _, err := os.Stat(tmp); err != nil {
			continue
		}
		out := filepath.Join(dir, "out.csv")
		var stderr strings.Builder
		t.Setenv("TMPDIR", tmp)
		if code := run(context.Background(), []string{"run", "--in", filepath.Join(dir, "link.csv"), "--out", out, "--header", "--delimiter", "comma", offline(t)}, &stderr); code != 0 {
			t.Fatalf("tmp %s: exit %d: %s", tmp, code, stderr.String())
		}
		rows := readCSV(t, out)
		if len(rows) != 3 || rows[2][6] != "true" || rows[1][6] != "false" {
			t.Errorf("tmp %s: result %q", tmp, rows)
		}
	}
}
