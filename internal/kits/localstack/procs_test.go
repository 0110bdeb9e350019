package localstack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnrecordedLeftoverNamed: a process that uses the directory's etcd
// data without a record is not killed; the error says exactly what to stop.
func TestUnrecordedLeftoverNamed(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 30", "etcd", "--data-dir="+filepath.Join(dir, "etcd"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(100 * time.Millisecond)
	err := stopLeftovers(dir, t.Logf)
	pid := strconv.Itoa(cmd.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), "(pid "+pid+") still uses "+filepath.Join(dir, "etcd")) || !strings.Contains(err.Error(), "kill "+pid) {
		t.Fatalf("error %v, want one naming pid %s and how to stop it", err, pid)
	}
}

// TestRecordedLeftoverStopped: a recorded process of an earlier run is
// stopped; one whose PID was reused (another start time) is left alone.
func TestRecordedLeftoverStopped(t *testing.T) {
	dir := t.TempDir()
	leftover := exec.Command("sleep", "30")
	other := exec.Command("sleep", "30")
	for _, c := range []*exec.Cmd{leftover, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan error, 1)
	go func() { waited <- leftover.Wait() }()
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	_, start, _, err := procStat(leftover.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_, otherStart, _, _ := procStat(other.Process.Pid)
	rec := `{"owner":{"pid":1,"start":1},"procs":[{"pid":` + strconv.Itoa(leftover.Process.Pid) + `,"start":` + strconv.FormatUint(start, 10) +
		`,"name":"etcd"},{"pid":` + strconv.Itoa(other.Process.Pid) + `,"start":` + strconv.FormatUint(otherStart+1, 10) + `,"name":"etcd"}]}`
	if err := writeFile(filepath.Join(dir, recordFile), rec); err != nil {
		t.Fatal(err)
	}
	if err := stopLeftovers(dir, t.Logf); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the recorded leftover was not stopped")
	}
	if (proc{PID: other.Process.Pid, Start: otherStart}).alive() == false {
		t.Error("a process whose PID matched but whose start time did not was stopped")
	}
}

// TestFailedStartStopsControlPlane: a start that fails after etcd and the
// API server came up (here the CRD directory is missing) stops them rather
// than leaving them running unrecorded.
func TestFailedStartStopsControlPlane(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set; run the tests with `make test`")
	}
	dir := t.TempDir()
	_, _, err := startControlPlaneIn(context.Background(), Options{Dir: dir, CRDDir: filepath.Join(dir, "no-crds"), AssetsDir: assets})
	if err == nil || !strings.Contains(err.Error(), "start control plane") || !strings.Contains(err.Error(), "no-crds") {
		t.Fatalf("error %v, want the start to fail on the missing CRD directory", err)
	}
	if left := controlPlaneChildren(); len(left) != 0 {
		for _, p := range left {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		t.Fatalf("left running after the failed start: %+v", left)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }
