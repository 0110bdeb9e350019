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
	"syscall"
	"testing"
)

// TestMain lets a test run this binary as the worker command in a child
// process (WORKER_TEST_MAIN=1), so that its peak RSS is its own.
func TestMain(m *testing.M) {
	if os.Getenv("WORKER_TEST_MAIN") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
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

// runChild runs `worker run` offline in a child process and returns its
// peak RSS in MiB.
func runChild(t *testing.T, in, out string, extra ...string) float64 {
	t.Helper()
	args := append([]string{"run", "--in", in, "--out", out, "--delimiter", "comma", "--header", "--email-column", "3",
		"--dns-server", "off", "--progress", "0", "--tmp-dir", filepath.Dir(in)}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "WORKER_TEST_MAIN=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("worker run: %v\n%s", err, b)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}

// TestRunMemoryBounded: the peak RSS of `worker run` does not grow with
// the list. A list 8 times longer (1.2M rows, 50 MB, 50 shards, four at
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
	opts := []string{"--shard-bytes", "1000000", "--dedup-memory", "4000000", "--parallel", "4"}
	small := writeRepeatingList(t, dir, 100_000)
	smallRSS := runChild(t, small, filepath.Join(dir, "small.csv"), opts...)
	big := writeRepeatingList(t, dir, 800_000)
	bigOut := filepath.Join(dir, "big.csv")
	bigRSS := runChild(t, big, bigOut, opts...)
	t.Logf("peak RSS: %.0f MiB at 150k rows, %.0f MiB at 1.2M rows", smallRSS, bigRSS)
	const bound = 160 // MiB: the engine (about 50) and a bounded working set
	if bigRSS > bound || bigRSS > smallRSS+32 {
		t.Errorf("peak RSS %.0f MiB at 1.2M rows (%.0f MiB at 150k): want under %d MiB and within 32 MiB of the short list's", bigRSS, smallRSS, bound)
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
