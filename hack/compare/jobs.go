package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"log"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/kits/stackrun"
)

// The "ours-jobs" tool is the list on the real Job path: the local stack
// (hack/localstack --executor=job: a real kube-apiserver and etcd, the
// real Job controller and scheduler, a test node running the worker pods
// as processes, the manager and the REST API) started as a child process
// with the world's DNS server and SMTP port and the verification settings
// ours-list gives `worker run` (engineConfig), in a configuration the
// manager hands to the pods. The list is uploaded through the REST API (service
// email_validation), split into -job-shards shards (pipeline.maxShards, with a small
// pipeline.shardBytes so that a 20k-row list gets them all), and its result
// downloaded when the list reaches Results. Its wall is from the list's
// creation (the upload's answer) to Results, not the stack's start.

// jobsSettings: the ours-jobs stack.
type jobsSettings struct {
	shards   int    // pipeline.maxShards
	fleetURL string // the stack's fleet.url (-jobs-fleet-url, else -fleet-url; "": none)
	bin      string // directory holding localstack and worker ("": build them)
	shardBy  string // pipeline.shardBy ("": the default)
	keep     bool   // keep the stack's state directory
	timeout  time.Duration
}

// variant is js for the tool ours-jobs:v: v ("rows", "domain", "mx") as the
// shard-by setting, and the fleet URL's key prefix made the variant's own
// (prefix "j1:" becomes "j1:domain:"), so that two variants in one
// invocation do not share learnt state and history. No v: js as is.
func (js jobsSettings) variant(v string) (jobsSettings, error) {
	if v == "" {
		return js, nil
	}
	js.shardBy = v
	if js.fleetURL == "" {
		return js, nil
	}
	u, err := url.Parse(js.fleetURL)
	if err != nil {
		return js, fmt.Errorf("-jobs-fleet-url: %w", err)
	}
	q := u.Query()
	q.Set("prefix", q.Get("prefix")+v+":")
	u.RawQuery = q.Encode()
	js.fleetURL = u.String()
	return js, nil
}

// runOursJobs runs rows as one list on the local stack's Job path and
// returns the answers, the worker pods' CPU, a note and the wall from
// creation to Results.
func runOursJobs(dnsAddr string, rows []string, s settings, js jobsSettings) (pred, raw []string, cpu, wall float64, note string, err error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, 0, 0, "", errors.New("ours-jobs: KUBEBUILDER_ASSETS is not set (the control plane binaries, as make run)")
	}
	dir, err := os.MkdirTemp("", "compare-jobs-")
	if err != nil {
		return nil, nil, 0, 0, "", err
	}
	defer func() {
		if js.keep || err != nil {
			log.Printf("ours-jobs: the stack's directory is kept: %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	s.fleetURL = js.fleetURL
	bin := js.bin
	if bin == "" {
		if bin, err = buildStack(dir); err != nil {
			return nil, nil, 0, 0, "", err
		}
	}
	in := filepath.Join(dir, "list.csv")
	if err := writeList(in, rows); err != nil {
		return nil, nil, 0, 0, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), js.timeout)
	defer cancel()
	conf, err := stackConfig(dnsAddr, s, js)
	if err != nil {
		return nil, nil, 0, 0, "", err
	}
	st, err := stackrun.Start(ctx, stackrun.Options{
		Bin: filepath.Join(bin, "localstack"), Root: "../..", Args: stackArgs(dir, bin), Config: conf,
		Env:     childEnv(),
		LogPath: filepath.Join(dir, "localstack.log"),
	})
	if err != nil {
		return nil, nil, 0, 0, "", err
	}
	defer st.Kill()
	res, err := runListOnStack(ctx, st, in, len(rows))
	if err != nil {
		return nil, nil, 0, 0, "", fmt.Errorf("%w\nlast lines of the stack's log (%s):\n%s", err, st.LogPath, st.LogTail(3000))
	}
	if err := st.Stop(); err != nil {
		return nil, nil, 0, 0, "", err
	}
	if pred, raw, err = answersInOrder(res.result, rows); err != nil {
		return nil, nil, 0, 0, "", err
	}
	note = fmt.Sprintf("local stack, --executor=job, pipeline.maxShards %d, pipeline.shardBy %q: upload %.1f s, %d pods ran\n%s",
		js.shards, js.shardBy, res.upload.Seconds(), len(res.pods), res.podNotes())
	return pred, raw, res.cpu.Seconds(), res.wall.Seconds(), note, nil
}

// buildStack builds the local stack and the worker into dir/bin.
func buildStack(dir string) (string, error) {
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./hack/localstack", "./cmd/worker")
	build.Dir, build.Stderr = "../..", os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the local stack and the worker: %w", err)
	}
	return bin, nil
}

// stackArgs are the local stack's flags: the job executor on a file
// store, no fixed ports. Its settings are stackConfig's.
func stackArgs(dir, bin string) []string {
	return []string{"--dir", filepath.Join(dir, "state"), "--executor=job", "--store=file", "--worker-dir", bin,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--api-listen", "127.0.0.1:0", "--api-metrics-bind-address", "0"}
}

// stackConfig is the stack's Configuration, which its manager hands to
// the Job pods: ours-list's (engineConfig, -config and -set included)
// with js.shards shards (a small pipeline.shardBytes, so that a 20k-row
// list gets them all), js.shardBy, JSON logs.
func stackConfig(dnsAddr string, s settings, js jobsSettings) ([]byte, error) {
	pipeline := map[string]any{"maxShards": max(1, js.shards), "shardBytes": 1024}
	if js.shardBy != "" {
		pipeline["shardBy"] = js.shardBy
	}
	return engineConfig(dnsAddr, s, map[string]any{"pipeline": pipeline, "logging": map[string]any{"format": "json"}})
}

// stackRun is what runListOnStack saw.
type stackRun struct {
	upload, wall time.Duration
	cpu          time.Duration // the worker pods' (waited for by the stack)
	result       [][]string
	pods         map[string]string // pod directory: the last lines of its log
}

// runListOnStack uploads the list, waits for Results and downloads the
// result.
func runListOnStack(ctx context.Context, st *stackrun.Stack, in string, n int) (*stackRun, error) {
	r := &stackRun{}
	before, _ := stackrun.ReadStat(st.Pid())
	t0 := time.Now()
	id, err := st.Upload(ctx, in, url.Values{"service": {"email_validation"}, "email_column": {"1"},
		"header": {"true"}, "delimiter": {","}, "name": {"world.csv"}})
	if err != nil {
		return nil, err
	}
	created := time.Now()
	r.upload = created.Sub(t0)
	log.Printf("ours-jobs: list %d created; waiting for Results", id)
	if err := st.PollResults(ctx, id, 200*time.Millisecond); err != nil {
		return nil, err
	}
	r.wall = time.Since(created)
	after, _ := stackrun.ReadStat(st.Pid())
	r.cpu = after.ChildrenCPU() - before.ChildrenCPU()
	var buf bytes.Buffer
	if _, err := st.Download(ctx, id, &buf); err != nil {
		return nil, err
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	if len(recs) != n+1 {
		return nil, fmt.Errorf("result has %d rows, want %d", len(recs)-1, n)
	}
	r.result = recs
	r.pods = podLogs(filepath.Join(filepath.Dir(st.LogPath), "state", "jobs", "pods"))
	return r, nil
}

// podLogs reads the last lines of every pod's worker.log under dir (the
// test node's pods/<namespace>_<pod>_<uid>/ directories).
func podLogs(dir string) map[string]string {
	out := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name(), "worker.log"))
			out[e.Name()] = lastLines(string(b), 3)
		}
	}
	return out
}

func (r *stackRun) podNotes() string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(r.pods)) {
		fmt.Fprintf(&b, "pod %s:\n%s", name, r.pods[name])
	}
	return b.String()
}

// answersInOrder scores the result file's rows (a header naming
// ev_status_code and ev_correction, the address in column 1) in the order
// of rows, matched by address (the same address's rows in turn), so that
// a result in another order than the input's would be scored right too.
func answersInOrder(recs [][]string, rows []string) (pred, raw []string, err error) {
	hdr := recs[0]
	code, corr := slices.Index(hdr, "ev_status_code"), slices.Index(hdr, "ev_correction")
	if code < 0 || corr < 0 {
		return nil, nil, fmt.Errorf("result header %q lacks ev_status_code or ev_correction", hdr)
	}
	where := map[string][]int{}
	for i, rec := range recs[1:] {
		where[rec[0]] = append(where[rec[0]], i+1)
	}
	ordered := make([][]string, len(rows))
	for i, a := range rows {
		at := where[a]
		if len(at) == 0 {
			return nil, nil, fmt.Errorf("row %d (%q) is not in the result", i+1, a)
		}
		ordered[i], where[a] = recs[at[0]], at[1:]
	}
	res, err := resultsOf(ordered, code, corr)
	if err != nil {
		return nil, nil, err
	}
	pred, raw = classifyOurs(res)
	return pred, raw, nil
}
