package realmta

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReapStale: a process that started a world and was killed (as go
// test kills a binary at its timeout) leaves Postfix's master running; the
// next Start stops it and removes the directory.
func TestReapStale(t *testing.T) {
	if os.Getenv("REALMTA_HELPER") == "1" {
		r, err := Start(World{Hosts: []Host{{Name: "mx.a.test", Software: Postfix}, {Name: "mx.b.test", Software: Exim}},
			Domains: []Domain{{Name: "a.test", Host: "mx.a.test"}}}, Options{})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("DIR", r.Dir())
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	t.Parallel()
	bins := Require(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestReapStale$")
	cmd.Env = append(os.Environ(), "REALMTA_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var dir string
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "DIR" {
			dir = f[1]
			break
		} else if len(f) > 0 && f[0] == "ERR" {
			t.Fatal(sc.Text())
		}
	}
	if dir == "" {
		_ = cmd.Process.Kill()
		t.Fatal("helper printed no world directory")
	}
	_ = cmd.Process.Kill() // our child; the world's Close never runs
	_ = cmd.Wait()
	master := filepath.Join(dir, "postfix", "queue", "pid", "master.pid")
	pid := readPid(t, master)
	time.Sleep(200 * time.Millisecond)
	if !alive(pid) {
		t.Fatalf("Postfix's master (pid %d) died with the helper; nothing to reap", pid)
	}
	// As if it had been left some time ago (a fresh lock file may be a
	// world being created).
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(filepath.Join(dir, ownerLock), old, old); err != nil {
		t.Fatal(err)
	}
	reapStale(bins)
	for i := 0; alive(pid) && i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("master (pid %d) still running after reapStale", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s not removed: %v", dir, err)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}
