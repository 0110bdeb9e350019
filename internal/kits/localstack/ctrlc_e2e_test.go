package localstack_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunCtrlC runs `make run` itself, in a process group of its own
// as a terminal runs it, and presses Ctrl-C there (SIGINT to the whole
// group: make and the local stack). The stack stops and exits 0, and make
// prints no error. (GNU make re-raises an interrupt it received itself,
// so the shell sees make end by SIGINT, status 130, which shells do not
// report; what users saw as a failure was make's "*** [run] Error 1",
// because go run exits 1 after a Ctrl-C whatever the program's status.)
func TestMakeRunCtrlC(t *testing.T) {
	// Its own state directory, free ports and process group: it runs
	// beside the other e2e tests (go test -parallel, GOMAXPROCS by default).
	t.Parallel()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatal("make is not installed: the README's first command is make run")
	}
	// make run builds its own binaries; the test only needs the root.
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(makeBin, "--no-print-directory", "run", "LOCAL_DIR="+t.TempDir(), "RUN_BIN="+t.TempDir(),
		"ARGS=--metrics-bind-address 0 --health-probe-bind-address 0 --api-listen 127.0.0.1:0 --api-metrics-bind-address 0")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+assets)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncWriter{b: &strings.Builder{}}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	up := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		once := false
		for sc.Scan() {
			_, _ = out.Write([]byte(sc.Text() + "\n"))
			if !once && strings.Contains(sc.Text(), "Ctrl-C stops it") {
				once = true
				close(up)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	select {
	case <-up:
	case err := <-exited:
		t.Fatalf("make run exited before the stack was up: %v\n%s", err, out.String())
	case <-time.After(10 * time.Minute):
		// make run compiles the worker and the local stack first: make test
		// warms the build cache (run-binaries), but a run of this test alone
		// on a fresh, busy machine may still compile for minutes.
		t.Fatalf("make run not up within 10 minutes:\n%s", out.String())
	}
	time.Sleep(time.Second)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case err = <-exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("make run did not stop within 90s of Ctrl-C:\n%s", out.String())
	}
	<-copied
	text := out.String()
	if strings.Contains(text, "make: ***") || strings.Contains(text, "Error 1") {
		t.Errorf("make reports an error after Ctrl-C:\n%s", text)
	}
	if !strings.Contains(text, "\nstopped.\n") {
		t.Errorf("the stack did not say it stopped:\n%s", text)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT:
		t.Log("make ended by the SIGINT it re-raised (GNU make does so when interrupted itself); no error printed")
	default:
		t.Errorf("make run after Ctrl-C: %v\n%s", err, text)
	}
}

// TestSecondCtrlC: Ctrl-C twice quits at once, still with status 0, and
// the next run stops the control plane the first left behind.
func TestSecondCtrlC(t *testing.T) {
	// Its own state directory, free ports and process group: it runs
	// beside the other e2e tests (go test -parallel, GOMAXPROCS by default).
	t.Parallel()
	bin, root := buildLocalstack(t)
	dir := t.TempDir()
	s := startStack(t, bin, root, dir)
	s.waitUp(t)
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.stdout.String(), "stopping..."); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no stopping... after Ctrl-C:\n%s", s.stdout.String())
		}
	}
	s.interruptAndWait(t, 30*time.Second) // the second; fails unless the exit status is 0
	if out := s.stdout.String(); !strings.Contains(out, "quitting without waiting") {
		t.Errorf("the second Ctrl-C was not the one that ended the run:\n%s", out)
	}
	next := startStack(t, bin, root, dir)
	next.waitUp(t)
	next.interruptAndWait(t, 60*time.Second)
	if left := usersOf(dir); len(left) != 0 {
		t.Errorf("processes %v still use %s", left, dir)
	}
}
