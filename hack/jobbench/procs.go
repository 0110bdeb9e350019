package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/emaildata/emaildata/internal/kits/stackrun"
)

// The stack's processes, from /proc: the stack process itself (the
// manager, the REST API and the test node) and its children (the control
// plane, the S3 server, and the worker pods while they run; a pod that
// ended was waited for by the test node, so its CPU is in the stack's
// cutime and cstime).

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

// children lists the live children of pid.
func children(pid int) []stackrun.ProcStat {
	entries, _ := os.ReadDir("/proc")
	var out []stackrun.ProcStat
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := stackrun.ReadStat(p); ok && s.PPid == pid {
			out = append(out, s)
		}
	}
	return out
}

// sampleTree reads the CPU of the stack and its children.
func sampleTree(pid int) cpuTable {
	t := cpuTable{}
	if s, ok := stackrun.ReadStat(pid); ok {
		t[groupStack] = s.CPU()
		t[groupWorkers] = s.ChildrenCPU()
	}
	for _, c := range children(pid) {
		g, ok := groups[c.Name]
		if !ok {
			g = groupOther
		}
		t[g] += c.CPU()
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
		g, ok := groups[c.Name]
		if !ok {
			g = groupOther
		}
		out[g] = max(out[g], peakRSS(c.Pid))
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
