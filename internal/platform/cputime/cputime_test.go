package cputime

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestSelfGrows(t *testing.T) {
	a := Self()
	if a == 0 {
		t.Skip("no CPU time on", runtime.GOOS)
	}
	// Spinning adds CPU time, however busy the machine (the wall clock
	// only bounds the wait).
	for end := time.Now().Add(5 * time.Second); Self()-a < 10*time.Millisecond; {
		if time.Now().After(end) {
			t.Fatalf("5s of spinning added %v of CPU time", Self()-a)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as /proc prints it.
	stat := "4242 (kube apiserver) x) S 17 4242 17 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 12 0 100 0 0"
	s, ok := parseStat(stat)
	if !ok || s.comm != "kube apiserver) x" || s.ppid != "17" || s.ticks != 281 {
		t.Errorf("parseStat = %+v, %v; want comm %q, ppid 17, 281 ticks", s, ok, "kube apiserver) x")
	}
	for _, bad := range []string{"garbage", "1 (a) S 1 2", "1 (a) S 1 2 3 4 5 6 7 8 9 10 x y"} {
		if _, ok := parseStat(bad); ok {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestChildrenAndLoad(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	c0 := Children()
	if err := exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done").Run(); err != nil {
		t.Skip("no sh:", err)
	}
	if c1 := Children(); c1 <= c0 {
		t.Errorf("a waited-for child added no CPU time (%v, %v)", c0, c1)
	}
	if la := LoadAverage(); len(strings.Fields(la)) != 3 {
		t.Errorf("LoadAverage %q", la)
	}
}

// A running child's CPU time is counted while it runs.
func TestRunning(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Skip("no sh:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for Running() < 20*time.Millisecond || Named("sh") < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("a spinning child shows %v of CPU time after 5s (%v for all sh)", Running(), Named("sh"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
