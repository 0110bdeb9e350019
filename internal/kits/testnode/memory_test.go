package testnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// The tests run this test binary as the container's process: with
// TESTNODE_HELPER=alloc:<MiB>:<seconds> it touches that much memory, then
// sleeps; with spawn:<MiB>:<seconds> it runs such a child and waits for it.
func TestMain(m *testing.M) {
	if mode := os.Getenv("TESTNODE_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

var sink []byte

func helper(mode string) int {
	var kind string
	var mib, secs int
	if _, err := fmt.Sscanf(mode, "%5s:%d:%d", &kind, &mib, &secs); err != nil {
		fmt.Fprintln(os.Stderr, "bad TESTNODE_HELPER:", mode, err)
		return 2
	}
	switch kind {
	case "alloc":
		sink = make([]byte, mib<<20)
		for i := 0; i < len(sink); i += 4096 {
			sink[i] = 1
		}
		time.Sleep(time.Duration(secs) * time.Second)
		return 0
	case "spawn":
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("TESTNODE_HELPER=alloc:%d:%d", mib, secs))
		if err := cmd.Run(); err != nil {
			return 1
		}
		return 0
	}
	return 2
}

// helperSpec is a process spec running the helper in mode with a memory
// limit of limitMiB.
func helperSpec(t *testing.T, mode string, limitMiB int64) processSpec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return processSpec{
		namespace: "ns", name: t.Name(), uid: types.UID(t.Name()),
		path: self, env: []string{"TESTNODE_HELPER=" + mode}, dir: dir,
		logPath: filepath.Join(dir, "log"), memLimit: limitMiB << 20,
	}
}

func waitDone(t *testing.T, p *process, within time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.kill("")
		<-p.done
		t.Fatalf("process still ran after %s", within)
	}
}

// The tree's memory is the sum over its processes: a child holding 64 MiB
// counts beside its parent.
func TestTreeMemory(t *testing.T) {
	p, err := startProcess(helperSpec(t, "spawn:64:30", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.kill(""); <-p.done }()
	var u usage
	var parent int64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		u = treeMemory(p.pid)
		parent, _, _ = readMemory(p.pid)
		if len(u.pids) == 2 && u.rss-parent >= 64<<20 {
			break
		}
	}
	if len(u.pids) != 2 || u.rss-parent < 64<<20 || u.used() < u.rss {
		t.Fatalf("tree memory %+v with the parent at %d bytes: want 2 processes, the child's 64 MiB counted", u, parent)
	}
}

// A node kills a container over its limit while it runs: the helper would
// sleep a minute after taking 64 MiB under a 32 MiB limit.
func TestOverLimitIsKilled(t *testing.T) {
	n := &Node{cfg: Config{MemoryInterval: 20 * time.Millisecond}, runs: map[types.UID]*process{},
		log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.enforceMemory(ctx)
	p, err := startProcess(helperSpec(t, "spawn:64:60", 32))
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.runs[p.uid] = p
	n.mu.Unlock()
	waitDone(t, p, 20*time.Second)
	code, reason, _, _ := p.outcome()
	if code != 137 || reason != "OOMKilled" {
		t.Errorf("exit %d reason %q, want 137 OOMKilled", code, reason)
	}
	if p.finished.Sub(p.started) > 15*time.Second {
		t.Errorf("killed after %s", p.finished.Sub(p.started))
	}
}

// A process that went over its limit and ended before any sample is
// reported OOMKilled (the kernel would have killed it); one that stayed
// under ends as it exited.
func TestOverLimitAtExit(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		limitMiB   int64
		wantCode   int32
		wantReason string
	}{
		{"alloc:64:0", 32, 137, "OOMKilled"},
		{"alloc:1:0", 256, 0, "Completed"},
		{"alloc:64:0", 0, 0, "Completed"}, // no limit
	} {
		p, err := startProcess(helperSpec(t, tc.mode, tc.limitMiB))
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, p, 20*time.Second)
		if code, reason, _, _ := p.outcome(); code != tc.wantCode || reason != tc.wantReason {
			t.Errorf("%s with limit %d MiB: exit %d reason %q, want %d %q", tc.mode, tc.limitMiB, code, reason, tc.wantCode, tc.wantReason)
		}
	}
}

// A small process started by a node that itself holds more than the
// process's limit ends as it exited: the node's own peak, which wait4 folds
// into the child's ru_maxrss, is not held against it.
func TestBigNodeSmallProcess(t *testing.T) {
	ballast := make([]byte, 128<<20)
	for i := range ballast {
		ballast[i] = 1 // resident, so the node's peak is above the limit
	}
	p, err := startProcess(helperSpec(t, "alloc:1:0", 32))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p, 20*time.Second)
	if code, reason, _, _ := p.outcome(); code != 0 || reason != "Completed" {
		t.Errorf("a 1 MiB process with a 32 MiB limit, from a node holding 128 MiB: exit %d reason %q, want 0 Completed", code, reason)
	}
	if p.cmd.ProcessState != nil && peakRSS(p.cmd.ProcessState) <= 32<<20 {
		t.Logf("ru_maxrss %d: this kernel did not fold the node's peak in; the test shows nothing here", peakRSS(p.cmd.ProcessState))
	}
	runtime.KeepAlive(ballast)
	// Give the memory back and reset this process's peak (clear_refs 5), so
	// tests after this one (or a -count repeat) start from a small node.
	ballast = nil
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// A container's peak memory is known when it ends and logged with its
// outcome: a helper that holds 64 MiB for a second under a 256 MiB limit
// peaks at 64 MiB or more, from the samples or from wait4, and no higher
// than its limit.
func TestPeakMemoryLogged(t *testing.T) {
	var logs bytes.Buffer
	n := &Node{cfg: Config{MemoryInterval: 20 * time.Millisecond}, runs: map[types.UID]*process{},
		log: slog.New(slog.NewJSONHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.enforceMemory(ctx)
	p, err := startProcess(helperSpec(t, "alloc:64:1", 256))
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.runs[p.uid] = p
	n.mu.Unlock()
	waitDone(t, p, 20*time.Second)
	n.logEnd("ns/pod", p)
	var line struct {
		Msg      string  `json:"msg"`
		Pod      string  `json:"pod"`
		Reason   string  `json:"reason"`
		Peak     int64   `json:"peak_rss_bytes"`
		From     string  `json:"peak_from"`
		Limit    int64   `json:"memory_limit_bytes"`
		CPUUser  float64 `json:"cpu_user_seconds"`
		CPUSys   float64 `json:"cpu_system_seconds"`
		Duration float64 `json:"seconds"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, logs.String())
	}
	if line.Msg != "container ended" || line.Pod != "ns/pod" || line.Reason != "Completed" || line.Limit != 256<<20 {
		t.Errorf("log line %s", logs.String())
	}
	if line.Peak < 64<<20 || line.Peak > 256<<20 || (line.From != "samples" && line.From != "wait4") {
		t.Errorf("peak %d bytes from %q, want 64 to 256 MiB: %s", line.Peak, line.From, logs.String())
	}
	if line.Duration < 1 || line.CPUUser+line.CPUSys <= 0 {
		t.Errorf("ran %.2f s with %.3f + %.3f CPU-s: want at least 1 s and some CPU", line.Duration, line.CPUUser, line.CPUSys)
	}
}

func TestMemoryLimit(t *testing.T) {
	c := corev1.Container{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}
	if got := memoryLimit(&c); got != 256<<20 {
		t.Errorf("limit 256Mi = %d bytes", got)
	}
	delete(c.Resources.Limits, corev1.ResourceMemory)
	if got := memoryLimit(&c); got != 0 {
		t.Errorf("a request without a limit = %d bytes, want 0 (none)", got)
	}
}

// BenchmarkTreeMemory is one sample of a Go process (this one: a dozen
// threads, no children), what the node reads per limited pod per interval.
func BenchmarkTreeMemory(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if u := treeMemory(pid); len(u.pids) != 1 {
			b.Fatalf("%+v", u)
		}
	}
}
