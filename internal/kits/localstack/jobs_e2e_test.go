package localstack_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunJobs runs docs/getting-started.md's "Lists as Jobs and pods" block (the
// one marked e2e:job-path) as a newcomer would, in a fresh copy of the
// repository (no bin/, no .local/): `make run ARGS=--executor=job`, which
// passes the worker directory as the relative "bin", then each following
// line in order from the copy's root, the `-w` watches in the background.
// The sample list must reach Results through a Job whose pods ran as worker
// processes, and the watches must have shown it. Then Ctrl-C.
//
// The only change to the guide's commands: the stack's ports are picked
// free (ARGS gains --api-listen=127.0.0.1:0 and disables the metrics and
// probe listeners), so that the test runs beside a developer's make run.
func TestMakeRunJobs(t *testing.T) {
	// Its own state directory, free ports and process group: it runs
	// beside the other e2e tests (go test -parallel, GOMAXPROCS by default).
	t.Parallel()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	stackLine, lines := readmeJobBlock(t, root)
	repo := freshCopy(t, root)
	kubectlBin, err := exec.LookPath("kubectl")
	if err != nil {
		kubectlBin = filepath.Join(assets, "kubectl")
	}
	// The guide's lines find kubectl on PATH (the assets' one otherwise).
	env := []string{"KUBEBUILDER_ASSETS=" + assets, "PATH=" + os.Getenv("PATH") + string(os.PathListSeparator) + assets}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "KUBEBUILDER_ASSETS=") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}

	stack := startMakeRun(t, repo, env, stackLine)
	if want := filepath.Join(repo, ".local", "kubeconfig"); stack.kubeconfig != want {
		t.Fatalf("make run's kubeconfig is %s; the guide exports %s", stack.kubeconfig, want)
	}

	// The guide's lines, in order; exports carry over to the next lines.
	wctx, stopWatches := context.WithCancel(context.Background())
	defer stopWatches()
	var exports []string
	type watch struct {
		line string
		cmd  *exec.Cmd
		out  *lockedBuffer
	}
	var watches []watch
	for _, l := range lines {
		script := strings.Join(append(exports, l), "\n")
		switch {
		case strings.HasPrefix(l, "export "):
			exports = append(exports, l)
		case isWatch(l):
			w := watch{line: l, out: &lockedBuffer{}}
			w.cmd = exec.CommandContext(wctx, "bash", "-c", script)
			w.cmd.Dir, w.cmd.Env, w.cmd.Stdout, w.cmd.Stderr = repo, env, w.out, w.out
			if err := w.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			watches = append(watches, w)
		default:
			c := exec.Command("bash", "-euo", "pipefail", "-c", script)
			c.Dir, c.Env = repo, env
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("guide line %q: %v\n%s\nmake run:\n%s", l, err, out, stack.output())
			}
		}
	}
	if len(watches) < 3 {
		t.Fatalf("the guide's block starts %d watches, want jobs, pods and emaillists", len(watches))
	}

	kubectl := func(args ...string) string {
		t.Helper()
		c := exec.Command(kubectlBin, append([]string{"--kubeconfig", stack.kubeconfig}, args...)...)
		c.Dir, c.Env = repo, env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		phase := kubectl("get", "emaillist", "sample-list", "-o", "jsonpath={.status.phase}")
		if phase == "Results" {
			break
		}
		if phase == "Failed" || time.Now().After(deadline) {
			t.Fatalf("sample list is %q, want Results:\n%s\njobs and pods:\n%s\nmake run:\n%s",
				phase, kubectl("get", "emaillist", "sample-list", "-o", "yaml"), kubectl("get", "jobs,pods", "-A", "-o", "wide"), stack.output())
		}
		time.Sleep(300 * time.Millisecond)
	}

	// The Job completed through pods that ran on the local node.
	jobs := kubectl("get", "jobs", "-n", "emaildata-system", "-l", "lists.emaildata.io/list=sample-list",
		"-o", "jsonpath={range .items[*]}{.metadata.name} {.status.succeeded}{\"\\n\"}{end}")
	f := strings.Fields(jobs)
	if len(f) != 2 || !strings.HasPrefix(f[0], "sample-list-") || f[1] == "0" {
		t.Fatalf("sample list's job: %q", jobs)
	}
	job := f[0]
	pods := kubectl("get", "pods", "-n", "emaildata-system", "-l", "batch.kubernetes.io/job-name="+job,
		"-o", "jsonpath={range .items[*]}{.spec.nodeName} {.status.phase}{\"\\n\"}{end}")
	for _, l := range strings.Split(strings.TrimSpace(pods), "\n") {
		if l != "local-node Succeeded" {
			t.Errorf("pod %q, want one Succeeded on local-node", l)
		}
	}
	time.Sleep(time.Second) // the watches' last lines
	stopWatches()
	var seen strings.Builder
	for _, w := range watches {
		_ = w.cmd.Wait()
		fmt.Fprintf(&seen, "$ %s\n%s\n", w.line, w.out.String())
	}
	all := seen.String()
	for _, want := range []string{job + " ", job + "-0-", "Running", "Completed", "sample-list", "Results"} {
		if !strings.Contains(all, want) {
			t.Errorf("the guide's watches did not show %q:\n%s", want, all)
		}
	}
	stack.interrupt(t, repo)
}

// readmeJobBlock returns the getting-started page's e2e:job-path block: its first line,
// the stack, and the others without comments and blank lines.
func readmeJobBlock(t *testing.T, root string) (string, []string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, gettingStarted))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "<!-- e2e:job-path -->\n```sh\n")
	if !ok {
		t.Fatal(gettingStarted + " has no e2e:job-path block")
	}
	block, _, _ := strings.Cut(after, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "make run ") {
		t.Fatalf(gettingStarted+" e2e:job-path block %q does not start with make run", lines)
	}
	return lines[0], lines[1:]
}

func isWatch(line string) bool {
	return strings.HasSuffix(line, " -w") || strings.Contains(line, " -w ")
}

// freshCopy copies the repository's files as a clone would have them (the
// tracked and untracked files git does not ignore: no bin/, no .local/)
// into a new directory.
//
// The directory's path is the same from run to run of one checkout
// (emaildata-fresh-<hash of root> in the temporary directory, emptied
// before and removed after): go build keys the compiled packages of the
// module by their directory, so a new path each run made make run there
// recompile every package of the module (minutes on 2 busy cores), while a
// stable one finds them in the build cache once a first run has built them.
func freshCopy(t *testing.T, root string) string {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files (the test copies the checkout as a clone would have it): %v", err)
	}
	dst := filepath.Join(os.TempDir(), fmt.Sprintf("emaildata-fresh-%x", sha256.Sum256([]byte(root)))[:len("emaildata-fresh-")+12])
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dst) })
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, name), filepath.Join(dst, name)); err != nil {
			if os.IsNotExist(err) { // deleted in the work tree, not yet in the index
				continue
			}
			t.Fatal(err)
		}
	}
	return dst
}

func copyFile(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// makeRun is `make run` running in its own process group, as in a terminal.
type makeRun struct {
	cmd        *exec.Cmd
	out        *lockedBuffer
	exited     chan error
	kubeconfig string
}

// startMakeRun runs line (`make run ARGS=...`) in repo, with free ports, and
// waits for its banner.
func startMakeRun(t *testing.T, repo string, env []string, line string) *makeRun {
	t.Helper()
	args := strings.Fields(line)
	const free = " --api-listen=127.0.0.1:0 --metrics-bind-address=0 --health-probe-bind-address=0 --api-metrics-bind-address=0"
	found := false
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "ARGS="); ok {
			args[i], found = "ARGS="+v+free, true
		}
	}
	if !found {
		t.Fatalf("guide line %q passes no ARGS", line)
	}
	m := &makeRun{out: &lockedBuffer{}, exited: make(chan error, 1)}
	m.cmd = exec.Command(args[0], args[1:]...)
	m.cmd.Dir, m.cmd.Env = repo, env
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stderr = m.out
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		executor := ""
		for sc.Scan() {
			l := sc.Text()
			m.out.Write([]byte(l + "\n"))
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "kubeconfig:":
				m.kubeconfig = f[1]
			case len(f) >= 2 && f[0] == "executor:":
				executor = f[1]
				banner <- executor
			}
		}
		m.exited <- m.cmd.Wait()
	}()
	t.Cleanup(func() {
		if m.cmd.ProcessState == nil { // the test failed half-way: stop it all
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT)
			select {
			case <-m.exited:
			case <-time.After(60 * time.Second):
				_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			}
		}
	})
	// make builds the worker and compiles the local stack in the new
	// directory first: minutes on a busy machine.
	select {
	case executor := <-banner:
		if executor != "job" || m.kubeconfig == "" {
			t.Fatalf("banner: executor %q kubeconfig %q\n%s", executor, m.kubeconfig, m.output())
		}
	case err := <-m.exited:
		t.Fatalf("make run exited (%v) before its banner:\n%s", err, m.output())
	case <-time.After(10 * time.Minute):
		t.Fatalf("no banner from make run within 10m:\n%s", m.output())
	}
	return m
}

func (m *makeRun) output() string { return m.out.String() }

// interrupt is Ctrl-C in make run's terminal: SIGINT to its process group.
// The stack stops what it started: "stopped." and no control plane record
// left. (make's own exit status after an interrupt is not checked here.)
func (m *makeRun) interrupt(t *testing.T, repo string) {
	t.Helper()
	if err := syscall.Kill(-m.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("make run did not stop within 60s of Ctrl-C:\n%s", m.output())
	}
	if !strings.Contains(m.output(), "\nstopped.\n") {
		t.Errorf("make run did not say it stopped:\n%s", m.output())
	}
	if _, err := os.Stat(filepath.Join(repo, ".local", "control-plane.json")); !os.IsNotExist(err) {
		t.Errorf("the control plane's record is still there after Ctrl-C (%v): its processes may outlive make run", err)
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
