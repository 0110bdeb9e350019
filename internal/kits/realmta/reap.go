package realmta

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A world's directory holds owner.lock, locked (flock) by the process that
// started it for as long as it lives. A test binary killed at its timeout
// never runs Close; the next Start finds its directory unlocked and stops
// what it left running (by the pids in the world's own pid files) before
// removing it.

const (
	ownerLock  = "owner.lock"
	closedMark = "closed" // Close stopped everything (the directory was kept)
)

// lockOwner creates and locks dir's owner.lock; the descriptor stays open
// (and the lock held) until the process exits or Close releases it.
func lockOwner(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ownerLock), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reapStale stops and removes the worlds left in the temporary directory
// by processes that are gone: those whose owner.lock exists, is some
// seconds old (a world being created has it for microseconds before
// locking it) and is not locked. A world closed with KeepDir is kept.
func reapStale(bins Binaries) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "realmta-*"))
	for _, dir := range dirs {
		st, err := os.Stat(filepath.Join(dir, ownerLock))
		if err != nil || time.Since(st.ModTime()) < 5*time.Second {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, closedMark)); err == nil {
			continue
		}
		f, err := lockOwner(dir)
		if err != nil {
			continue // alive (or not a world)
		}
		conf := filepath.Join(dir, "postfix", "conf")
		if _, err := os.Stat(filepath.Join(conf, "main.cf")); err == nil {
			_ = exec.Command(bins.Postfix, "-c", conf, "stop").Run()
		}
		pids := []string{"postfix/queue/pid/master.pid", "exim/exim.pid", "nsd/nsd.pid", "postgrey/postgrey.pid", "redis/redis.pid"}
		if m, _ := filepath.Glob(filepath.Join(dir, "sendmail", "*", "sendmail.pid")); len(m) > 0 {
			for _, f := range m {
				rel, _ := filepath.Rel(dir, f)
				pids = append(pids, rel)
			}
		}
		for _, pf := range pids {
			killPidFile(filepath.Join(dir, pf))
		}
		time.Sleep(100 * time.Millisecond)
		_ = os.RemoveAll(dir)
		f.Close()
	}
}

// killPidFile kills the process a stale world's pid file names, if its
// command line still shows it is one of that world's daemons.
func killPidFile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(b), "\n") // sendmail's: pid, then its command line
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return
	}
	// Postfix's master runs in its queue directory; the others name their
	// configuration on their command line.
	world := filepath.Dir(filepath.Dir(path))
	if cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd")); err == nil && strings.HasSuffix(path, "master.pid") {
		world = filepath.Dir(filepath.Dir(path)) // .../postfix/queue
		if cwd == world {
			killPid(pid)
		}
		return
	}
	if strings.Contains(string(cmdline), world) {
		killPid(pid)
	}
}
