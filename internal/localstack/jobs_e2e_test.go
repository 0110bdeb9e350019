package localstack_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunJobs does what the README says to watch the Job path: `make
// run ARGS=--executor=job`, the printed `kubectl get jobs -w` and `kubectl
// get pods -w` in other terminals, `kubectl apply -f config/samples/`; the
// sample list reaches Results through a Job whose pods ran as worker
// processes, and the watches showed them. Then Ctrl-C.
func TestMakeRunJobs(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		kubectl = filepath.Join(assets, "kubectl")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./hack/localstack", "./cmd/worker")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "localstack"), "--dir", dir, "--executor=job", "--worker-dir", bin,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--api-listen", "127.0.0.1:0", "--api-metrics-bind-address", "0")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+assets)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{b: &strings.Builder{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()

	var kubeconfig, executor string
	var watchLines []string
	deadline := time.After(2 * time.Minute)
	for len(watchLines) < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("localstack exited early; logs:\n%s", logs.String())
			}
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "kubeconfig:":
				kubeconfig = f[1]
			case len(f) >= 2 && f[0] == "executor:":
				executor = f[1]
			case len(f) > 2 && f[0] == "kubectl" && f[1] == "get" && (f[2] == "jobs" || f[2] == "pods") && strings.Contains(l, " -w "):
				line, _, _ := strings.Cut(strings.TrimSpace(l), "#")
				watchLines = append(watchLines, line)
			}
		case <-deadline:
			t.Fatalf("no banner within 2m; logs:\n%s", logs.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	if kubeconfig == "" || executor != "job" {
		t.Fatalf("banner: kubeconfig %q executor %q", kubeconfig, executor)
	}

	// The watches exactly as printed, running while the list does.
	wctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	var watched lockedBuffer
	var watches []*exec.Cmd
	for _, l := range watchLines {
		args := append([]string{"--kubeconfig", kubeconfig}, strings.Fields(strings.TrimPrefix(l, "kubectl "))...)
		w := exec.CommandContext(wctx, kubectl, args...)
		w.Stdout, w.Stderr = &watched, &watched
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		watches = append(watches, w)
	}

	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		c.Dir = root
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("apply", "-f", "config/samples/")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		phase := run("get", "emaillist", "sample-list", "-o", "jsonpath={.status.phase}")
		if phase == "Results" {
			break
		}
		if phase == "Failed" {
			t.Fatalf("sample list failed:\n%s", run("get", "emaillist", "sample-list", "-o", "yaml"))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sample list did not reach Results (phase %q); jobs and pods:\n%s\nlogs:\n%s",
				phase, run("get", "jobs,pods", "-A", "-o", "wide"), logs.String())
		case <-time.After(300 * time.Millisecond):
		}
	}

	// The Job completed through pods that ran on the local node.
	jobs := run("get", "jobs", "-n", "emaildata-system", "-l", "lists.emaildata.io/list=sample-list",
		"-o", "jsonpath={range .items[*]}{.metadata.name} {.status.succeeded}{\"\\n\"}{end}")
	if f := strings.Fields(jobs); len(f) != 2 || !strings.HasPrefix(f[0], "sample-list-") || f[1] == "0" {
		t.Fatalf("sample list's job: %q", jobs)
	}
	pods := run("get", "pods", "-n", "emaildata-system", "-l", "batch.kubernetes.io/job-name="+strings.Fields(jobs)[0],
		"-o", "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{\"\\n\"}{end}")
	for _, l := range strings.Split(strings.TrimSpace(pods), "\n") {
		if l != "local-node Succeeded" {
			t.Errorf("pod %q, want one Succeeded on local-node", l)
		}
	}
	time.Sleep(time.Second)
	stopWatch()
	for _, w := range watches {
		_ = w.Wait()
	}
	w := watched.String()
	job := strings.Fields(jobs)[0]
	if !strings.Contains(w, job+" ") || !strings.Contains(w, job+"-0-") || !strings.Contains(w, "Completed") || !strings.Contains(w, "Running") {
		t.Errorf("the watches did not show the job and its pods running and completing:\n%s", w)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("localstack exit: %v; logs:\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("localstack did not stop within 60s of Ctrl-C")
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
