package localstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The control plane's processes (etcd, kube-apiserver) run in their own
// process groups, so they outlive a local stack that is killed. Each run
// records them, with their start times (so a reused PID is never mistaken
// for them), under the state directory; the next run stops the ones that
// are still there before it starts its own.

// recordFile names the record under the state directory.
const recordFile = "control-plane.json"

// controlPlaneNames are the processes envtest starts.
var controlPlaneNames = []string{"etcd", "kube-apiserver"}

// proc identifies one process for as long as it lives.
type proc struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // clock ticks since boot, from /proc/<pid>/stat
	Name  string `json:"name"`
}

type record struct {
	Owner proc   `json:"owner"`
	Procs []proc `json:"procs"`
}

// procStat reads a process's parent, start time and name; a zombie counts
// as gone.
func procStat(pid int) (ppid int, start uint64, name string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, "", err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, 0, "", errors.New("malformed stat")
	}
	name = s[open+1 : end]
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, 0, "", errors.New("short stat")
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, 0, "", errors.New("exited")
	}
	ppid, _ = strconv.Atoi(f[1])
	start, err = strconv.ParseUint(f[19], 10, 64)
	return ppid, start, name, err
}

// alive reports whether p is still the process it was.
func (p proc) alive() bool {
	_, start, _, err := procStat(p.PID)
	return err == nil && start == p.Start
}

func self() proc {
	_, start, name, _ := procStat(os.Getpid())
	return proc{PID: os.Getpid(), Start: start, Name: name}
}

// pids lists the processes in /proc.
func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// controlPlaneChildren lists this process's etcd and kube-apiserver children.
func controlPlaneChildren() []proc {
	var out []proc
	for _, pid := range pids() {
		ppid, start, name, err := procStat(pid)
		if err == nil && ppid == os.Getpid() && slices.Contains(controlPlaneNames, name) {
			out = append(out, proc{PID: pid, Start: start, Name: name})
		}
	}
	return out
}

// recordControlPlane writes this run's control-plane processes.
func recordControlPlane(dir string) error {
	b, err := json.Marshal(record{Owner: self(), Procs: controlPlaneChildren()})
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, recordFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, recordFile))
}

func forgetControlPlane(dir string) { _ = os.Remove(filepath.Join(dir, recordFile)) }

// stopLeftovers stops the recorded processes of an earlier run of this
// directory that are still alive. It refuses when that run itself is still
// alive, and names any other process still using the directory's etcd data.
func stopLeftovers(dir string, logf func(format string, args ...any)) error {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err == nil {
		var rec record
		if json.Unmarshal(b, &rec) == nil {
			if rec.Owner.PID != os.Getpid() && rec.Owner.alive() {
				return fmt.Errorf("another local stack (pid %d) is running with %s; stop it first (Ctrl-C in its terminal, or kill %d)", rec.Owner.PID, dir, rec.Owner.PID)
			}
			var left []proc
			for _, p := range rec.Procs {
				if p.alive() {
					logf("stopping %s (pid %d) left running by an earlier run of %s", p.Name, p.PID, dir)
					left = append(left, p)
				}
			}
			terminate(left, 10*time.Second)
		}
		forgetControlPlane(dir)
	}
	etcdDir := filepath.Join(dir, "etcd")
	for _, pid := range pids() {
		args := cmdline(pid)
		if pid != os.Getpid() && len(args) > 0 && slices.Contains(args, "--data-dir="+etcdDir) {
			return fmt.Errorf("%s (pid %d) still uses %s, and no record says which run started it; stop it with `kill %d` and start again",
				filepath.Base(args[0]), pid, etcdDir, pid)
		}
	}
	return nil
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// terminate sends SIGTERM to every process, then SIGKILL to those still
// there after grace, and waits for them to go.
func terminate(ps []proc, grace time.Duration) {
	for _, p := range ps {
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for _, p := range ps {
		for p.alive() {
			if time.Now().After(deadline) {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// killControlPlaneChildren stops the control plane this process is still
// starting, so an interrupted start returns promptly.
func killControlPlaneChildren() {
	for _, p := range controlPlaneChildren() {
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
	}
}
