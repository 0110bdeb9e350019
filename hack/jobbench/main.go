// Command jobbench measures one large list on the Job path, as `make run
// ARGS="--executor=job --store=s3"` runs it: the local stack (a real
// kube-apiserver and etcd, the real Job controller and scheduler, the test
// node running worker pods as processes with their memory limits enforced,
// the manager and the REST API, a SeaweedFS S3-compatible store) started as
// a child process, the list uploaded through the REST API (multipart, into
// the S3 store), and the run watched until Results. Verification is the
// local stack's default, offline (syntax, corrections, lists; no DNS, no
// SMTP): the run measures the pipeline at scale, not mail servers.
//
//	go build -o /tmp/jb/ ./hack/genlist ./hack/jobbench ./hack/localstack ./cmd/worker
//	/tmp/jb/genlist -rows 10000000 -out l10m.csv
//	/tmp/jb/jobbench -bin /tmp/jb -in l10m.csv -shards 16,2,1 -result res.csv
//	/tmp/jb/genlist -check -in l10m.csv -result res.csv
//
// For every shard count it starts a fresh stack (pipeline.maxShards: N), uploads
// the list, and reports: the upload's wall time and the stack's peak RSS
// during it; wall time from the list's creation (the upload's answer) to
// Results, with the times it was first seen Processing; the CPU of every
// process of the stack over that span (the stack process, that is the
// manager, the REST API and the test node; the worker pods; etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler; the S3 server);
// every pod's peak RSS against its memory limit, from the test node's
// "container ended" log lines; the stack process's peak RSS from creation
// to Results (VmHWM, reset with clear_refs when the list is created); and
// the result's SHA-256, which must be the same for every shard count. The
// first run's result file is written to -result, for genlist -check.
//
// It needs KUBEBUILDER_ASSETS (the control plane, as make run) and the S3
// server (hack/s3-server.sh builds it; EMAILDATA_S3_SERVER names it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/emaildata/emaildata/internal/kits/s3server"
)

type config struct {
	in, bin, dir, root, result string
	store                      string
	shards                     []int
	shardBytes                 int64
	keep                       bool
	timeout                    time.Duration
}

func main() {
	var c config
	shards := flag.String("shards", "16", "shard counts to run, comma separated: one fresh stack each (pipeline.maxShards)")
	flag.StringVar(&c.in, "in", "", "list file (id,name,email with a header, as genlist writes)")
	flag.StringVar(&c.bin, "bin", "", "directory holding the localstack and worker binaries (default: built into a temporary directory)")
	flag.StringVar(&c.dir, "dir", "", "parent of the stacks' state directories (default: next to -in); each is removed after its run unless -keep")
	flag.StringVar(&c.root, "root", ".", "repository root (CRDs in config/crd/bases)")
	flag.StringVar(&c.result, "result", "", "write the first run's result file here (for genlist -check)")
	flag.Int64Var(&c.shardBytes, "shard-bytes", 0, "target input bytes per shard (pipeline.shardBytes; 0: the manager's default, 8 MiB)")
	flag.StringVar(&c.store, "store", "s3", "the stack's store: s3 (SeaweedFS) or file (a directory, for comparison)")
	flag.BoolVar(&c.keep, "keep", false, "keep the stacks' state directories")
	flag.DurationVar(&c.timeout, "timeout", time.Hour, "longest wait for one list")
	flag.Parse()
	for _, f := range strings.Split(*shards, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fail(fmt.Errorf("-shards %q: want positive counts, comma separated", *shards))
		}
		c.shards = append(c.shards, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "jobbench:", err)
	os.Exit(1)
}

func run(ctx context.Context, c config) error {
	if c.in == "" {
		return errors.New("-in is required")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set (the control plane binaries: make envtest-assets)")
	}
	root, err := filepath.Abs(c.root)
	if err != nil {
		return err
	}
	c.root = root
	if c.dir == "" {
		c.dir = filepath.Dir(c.in)
	}
	weed := ""
	if c.store == "s3" {
		if weed, err = s3server.Binary(); err != nil {
			return err
		}
	}
	if c.bin == "" {
		if c.bin, err = build(root); err != nil {
			return err
		}
		defer os.RemoveAll(c.bin)
	}
	var first [32]byte
	for i, n := range c.shards {
		r, err := runOnce(ctx, c, weed, n, i == 0)
		if err != nil {
			return fmt.Errorf("%d shards: %w", n, err)
		}
		r.print(os.Stdout)
		if i == 0 {
			first = r.sha
		} else if r.sha != first {
			return fmt.Errorf("%d shards: result SHA-256 %x differs from the first run's %x", n, r.sha, first)
		}
	}
	if len(c.shards) > 1 {
		fmt.Printf("every run's result has SHA-256 %x\n", first)
	}
	return nil
}

// build compiles the local stack and the worker into a temporary directory.
func build(root string) (string, error) {
	dir, err := os.MkdirTemp("", "jobbench-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "./hack/localstack", "./cmd/worker")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("build: %w", err)
	}
	return dir, nil
}

// runOnce runs the list once on a fresh stack split into at most shards.
func runOnce(ctx context.Context, c config, weed string, shards int, keepResult bool) (*report, error) {
	dir, err := os.MkdirTemp(c.dir, fmt.Sprintf("jobbench-%d-", shards))
	if err != nil {
		return nil, err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	st, err := startStack(ctx, c, weed, dir, shards)
	if err != nil {
		return nil, err
	}
	defer st.Kill()
	r := &report{shards: shards, store: c.store, loadBefore: loadAverage()}
	if err := measure(ctx, c, st, r, keepResult); err != nil {
		return nil, fmt.Errorf("%w\nlast lines of the stack's log:\n%s", err, st.LogTail(4000))
	}
	if err := st.Stop(); err != nil {
		return nil, err
	}
	pods, err := podEnds(st.LogPath)
	if err != nil {
		return nil, err
	}
	r.pods = pods
	r.loadAfter = loadAverage()
	return r, nil
}

// measure uploads the list, waits for Results and downloads the result,
// sampling the stack's processes between the steps.
func measure(ctx context.Context, c config, st *stack, r *report, keepResult bool) error {
	r.idleRSS = rss(st.Pid())
	resetPeak(st.Pid())
	t0 := time.Now()
	id, err := st.upload(ctx, c.in)
	if err != nil {
		return err
	}
	r.upload = time.Since(t0)
	r.uploadPeak = peakRSS(st.Pid())
	r.list = fmt.Sprintf("list-%d", id)
	// The list exists now: the span measured starts.
	for _, p := range children(st.Pid()) {
		resetPeak(p.Pid)
	}
	resetPeak(st.Pid())
	before := sampleTree(st.Pid())
	start := time.Now()
	l, phases, err := st.waitResults(ctx, r.list, c.timeout)
	if err != nil {
		return err
	}
	r.created, r.results = start, time.Now()
	r.wall = r.results.Sub(start)
	r.cpu = sampleTree(st.Pid()).sub(before)
	r.stackPeak = peakRSS(st.Pid())
	r.childPeaks = childPeaks(st.Pid())
	r.processing = phases.processing.Sub(start)
	r.rows, r.listShards, r.bytes = l.Status.Records, int(l.Status.Shards), l.Status.SizeBytes
	if r.podStates, err = st.podStates(ctx, l); err != nil {
		return err
	}
	out := ""
	if keepResult {
		out = c.result
	}
	t1 := time.Now()
	if r.sha, r.resultBytes, err = st.download(ctx, id, out); err != nil {
		return err
	}
	r.download = time.Since(t1)
	return nil
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
