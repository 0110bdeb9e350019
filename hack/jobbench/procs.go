package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The stack's processes, from /proc: the stack process itself (the
// manager, the REST API and the test node) and its children (the control
// plane, the S3 server, and the worker pods while they run; a pod that
// ended was waited for by the test node, so its CPU is in the stack's
// cutime and cstime).

// clockTick is USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// Process groups of the CPU table, by command name (/proc/<pid>/comm is
// cut to 15 characters).
var groups = map[string]string{
	"etcd":            "etcd",
	"kube-apiserver":  "kube-apiserver",
	"kube-controller": "kube-controller-manager",
	"kube-scheduler":  "kube-scheduler",
	"weed":            "S3 server",
	"worker":          "worker pods",
}

// The stack process's own row and the pods' waited-for CPU.
const (
	groupStack   = "stack (manager, REST API, test node)"
	groupWorkers = "worker pods"
	groupOther   = "other children"
)

// cpuTable is CPU time per group.
type cpuTable map[string]time.Duration

func (t cpuTable) sub(o cpuTable) cpuTable {
	out := cpuTable{}
	for k, v := range t {
		out[k] = v - o[k]
	}
	return out
}

func (t cpuTable) total() (sum time.Duration) {
	for _, v := range t {
		sum += v
	}
	return sum
}

type procStat struct {
	pid, ppid                    int
	name                         string
	utime, stime, cutime, cstime int64 // clock ticks
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(string(b[end+1:])) // f[0] is field 3, state
	if len(f) < 15 {
		return procStat{}, false
	}
	num := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	return procStat{pid: pid, ppid: int(num(1)), name: string(b[open+1 : end]),
		utime: num(11), stime: num(12), cutime: num(13), cstime: num(14)}, true
}

// children lists the live children of pid.
func children(pid int) []procStat {
	entries, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := readStat(p); ok && s.ppid == pid {
			out = append(out, s)
		}
	}
	return out
}

// sampleTree reads the CPU of the stack and its children.
func sampleTree(pid int) cpuTable {
	t := cpuTable{}
	if s, ok := readStat(pid); ok {
		t[groupStack] = time.Duration(s.utime+s.stime) * clockTick
		t[groupWorkers] = time.Duration(s.cutime+s.cstime) * clockTick
	}
	for _, c := range children(pid) {
		g, ok := groups[c.name]
		if !ok {
			g = groupOther
		}
		t[g] += time.Duration(c.utime+c.stime) * clockTick
	}
	return t
}

// resetPeak resets a process's peak RSS (VmHWM) to its RSS now.
func resetPeak(pid int) {
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// peakRSS is a process's VmHWM in bytes.
func peakRSS(pid int) int64 { return statusBytes(pid, "VmHWM:") }

// rss is a process's VmRSS in bytes.
func rss(pid int) int64 { return statusBytes(pid, "VmRSS:") }

// statusBytes reads a kB field of /proc/<pid>/status, in bytes.
func statusBytes(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// childPeaks is the peak RSS of each group of live children.
func childPeaks(pid int) map[string]int64 {
	out := map[string]int64{}
	for _, c := range children(pid) {
		g, ok := groups[c.name]
		if !ok {
			g = groupOther
		}
		out[g] = max(out[g], peakRSS(c.pid))
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
