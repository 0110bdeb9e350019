package localstack_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stack is a running local stack binary.
type stack struct {
	cmd    *exec.Cmd
	logs   *syncWriter
	banner chan string // the kubeconfig line, once the stack is up
	exited chan error
	stdout *syncWriter
}

// built is the package's one build of the local stack and the worker:
// every e2e test shares it rather than linking its own copy (each link is
// several seconds of the 2 cores the tests share).
var built struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

// binDir is the directory of the shared build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildBinaries builds ./hack/localstack and ./cmd/worker once for the
// package and returns the directory holding them and the repository root.
func buildBinaries(t *testing.T) (dir, root string) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	built.once.Do(func() {
		binDir, built.err = os.MkdirTemp("", "localstack-e2e-bin-")
		if built.err != nil {
			return
		}
		build := exec.Command("go", "build", "-o", binDir+"/", "./hack/localstack", "./cmd/worker")
		build.Dir = root
		built.out, built.err = build.CombinedOutput()
		built.dir = binDir
	})
	if built.err != nil {
		t.Fatalf("build localstack and worker: %v\n%s", built.err, built.out)
	}
	return built.dir, root
}

func buildLocalstack(t *testing.T) (bin, root string) {
	t.Helper()
	dir, root := buildBinaries(t)
	return filepath.Join(dir, "localstack"), root
}

func startStack(t *testing.T, bin, root, dir string) *stack {
	t.Helper()
	cmd := exec.Command(bin, "--dir", dir, "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--api-listen", "127.0.0.1:0", "--api-metrics-bind-address", "0")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+os.Getenv("KUBEBUILDER_ASSETS"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{cmd: cmd, logs: &syncWriter{b: &strings.Builder{}}, banner: make(chan string, 1), exited: make(chan error, 1),
		stdout: &syncWriter{b: &strings.Builder{}}}
	cmd.Stderr = s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = s.stdout.Write([]byte(sc.Text() + "\n"))
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "kubeconfig:" {
				s.banner <- f[1]
			}
		}
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return s
}

func (s *stack) waitUp(t *testing.T) string {
	t.Helper()
	select {
	case kc := <-s.banner:
		return kc
	case err := <-s.exited:
		t.Fatalf("localstack exited before it was up: %v; logs:\n%s", err, s.logs.String())
	case <-time.After(150 * time.Second):
		t.Fatalf("localstack not up within 150s; logs:\n%s", s.logs.String())
	}
	return ""
}

func (s *stack) interruptAndWait(t *testing.T, within time.Duration) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("exit after Ctrl-C: %v (want 0); logs:\n%s", err, s.logs.String())
		}
	case <-time.After(within):
		t.Fatalf("localstack did not stop within %s of Ctrl-C; logs:\n%s", within, s.logs.String())
	}
}

// usersOf lists the processes whose arguments name dir's etcd data.
func usersOf(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), "--data-dir="+filepath.Join(dir, "etcd")+"\x00") {
			if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
				out = append(out, pid)
			}
		}
	}
	return out
}

// TestCrashRecoveryE2E: SIGKILL the local stack (its etcd and
// kube-apiserver survive, in their own process groups), start it again in
// the same directory: it stops the leftovers it recorded and comes up;
// Ctrl-C then exits 0 and leaves nothing running.
func TestCrashRecoveryE2E(t *testing.T) {
	// Its own state directory, free ports and process group: it runs
	// beside the other e2e tests (go test -parallel, GOMAXPROCS by default).
	t.Parallel()
	bin, root := buildLocalstack(t)
	dir := t.TempDir()
	first := startStack(t, bin, root, dir)
	first.waitUp(t)
	var rec struct {
		Procs []struct {
			PID  int    `json:"pid"`
			Name string `json:"name"`
		} `json:"procs"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "control-plane.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || len(rec.Procs) != 2 {
		t.Fatalf("control-plane record %s: %v", b, err)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	if len(usersOf(dir)) == 0 {
		t.Fatal("no leftover etcd after SIGKILL: the test no longer reproduces the crash")
	}

	second := startStack(t, bin, root, dir)
	kc := second.waitUp(t)
	for _, p := range rec.Procs {
		if !strings.Contains(second.logs.String(), "stopping "+p.Name+" (pid "+strconv.Itoa(p.PID)+") left running by an earlier run") {
			t.Errorf("the second run does not say it stopped %s %d; logs:\n%s", p.Name, p.PID, second.logs.String())
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(p.PID)); err == nil {
			if st, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/stat"); !strings.Contains(string(st), ") Z ") {
				t.Errorf("leftover %s %d still runs", p.Name, p.PID)
			}
		}
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		kubectl = filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", kc, "get", "emaillists").CombinedOutput(); err != nil {
		t.Fatalf("kubectl against the recovered stack: %v\n%s", err, out)
	}
	second.interruptAndWait(t, 60*time.Second)
	if left := usersOf(dir); len(left) != 0 {
		t.Errorf("processes %v still use %s after Ctrl-C", left, dir)
	}
}

// TestCtrlCWhileStarting: Ctrl-C while the control plane is still starting
// stops at once (no waiting for it to come up), exits 0, and leaves nothing
// running.
func TestCtrlCWhileStarting(t *testing.T) {
	// Its own state directory, free ports and process group: it runs
	// beside the other e2e tests (go test -parallel, GOMAXPROCS by default).
	t.Parallel()
	bin, root := buildLocalstack(t)
	dir := t.TempDir()
	s := startStack(t, bin, root, dir)
	deadline := time.Now().Add(60 * time.Second)
	for len(usersOf(dir)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("etcd never started; logs:\n%s", s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	s.interruptAndWait(t, 20*time.Second)
	t.Logf("stopped %s after Ctrl-C", time.Since(start).Round(time.Millisecond))
	select {
	case <-s.banner:
		t.Log("the stack came up before the signal was handled")
	default:
	}
	time.Sleep(200 * time.Millisecond)
	if left := usersOf(dir); len(left) != 0 {
		t.Errorf("processes %v still use %s after Ctrl-C", left, dir)
	}
}
