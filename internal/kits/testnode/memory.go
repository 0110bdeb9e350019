package testnode

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Memory limits. A kubelet puts each container in a cgroup whose memory
// limit is the container's, and the kernel kills a container that goes over
// it: the container terminates with reason OOMKilled and exit code 137.
//
// This node does not make cgroups: on the machines it runs on (a developer's
// laptop without root; CI sandboxes whose cgroup v2 has no memory controller
// and whose v1 hierarchy belongs to the sandbox) there is none it may use.
// It watches instead. Every MemoryInterval it reads the memory of each
// limited container's process tree from /proc and kills (SIGKILL) a tree
// over its limit. The figure it compares is the larger of the tree's summed
// resident set (VmRSS) now and the largest peak (VmHWM) of one of its
// processes, so a peak between two samples counts as soon as the process is
// next looked at; a process's first second is sampled every 5 ms besides
// (watchYoung), so a short one cannot slip between two rounds. A process that went over its limit and ended before the
// next sample is reported OOMKilled too, from its peak as wait4 reports it
// (ru_maxrss) where that figure is its own (see overLimitAtExit): the
// kernel would have killed it then. What such a process
// did after going over is not undone, which is the one way this node is
// more lenient than a kernel. RSS counts file-backed pages (the binary's
// text), which a kernel could reclaim before killing, so the node is a
// little stricter than a cgroup for a container near its limit.
// Linux only (it needs /proc). One sample of a Go worker costs about
// 0.1 ms of CPU (BenchmarkTreeMemory), 0.1% of a core per pod at 100 ms.

// DefaultMemoryInterval is how often the node samples memory by default.
const DefaultMemoryInterval = 100 * time.Millisecond

// memoryLimit is a container's memory limit in bytes; 0 means none.
func memoryLimit(c *corev1.Container) int64 {
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		return q.Value()
	}
	return 0
}

// enforceMemory samples the memory of limited containers until ctx ends.
func (n *Node) enforceMemory(ctx context.Context) {
	t := time.NewTicker(n.cfg.MemoryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range n.limited() {
			n.checkMemory(p)
		}
	}
}

// youngInterval and youngFor: how often, and for how long after its start,
// a limited process is sampled on its own besides the node's round.
const (
	youngInterval = 5 * time.Millisecond
	youngFor      = time.Second
)

// watchYoung samples a limited process every youngInterval during its first
// youngFor. A short process (a worker given two rows ends within a few
// hundred milliseconds) could otherwise go over its limit and end between
// two rounds of the node, and wait4 cannot always tell afterwards (see
// overLimitAtExit). About 25 ms of CPU per pod (BenchmarkTreeMemory).
func (n *Node) watchYoung(p *process) {
	if p.memLimit <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(youngInterval)
		defer t.Stop()
		for end := time.Now().Add(youngFor); time.Now().Before(end) && !p.exited(); <-t.C {
			n.checkMemory(p)
		}
	}()
}

// checkMemory kills p's tree when it is over its limit.
func (n *Node) checkMemory(p *process) {
	u := treeMemory(p.pid)
	used := u.used()
	p.sampled(used)
	if used > p.memLimit && !p.exited() {
		n.log.Info("container over its memory limit: OOMKilled", "pod", p.namespace+"/"+p.name,
			"rss", quantity(used), "limit", quantity(p.memLimit), "processes", len(u.pids))
		p.oomKill(u.pids)
	}
}

// limited lists the running processes that have a memory limit.
func (n *Node) limited() []*process {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*process
	for _, p := range n.runs {
		if p.memLimit > 0 && !p.exited() {
			out = append(out, p)
		}
	}
	return out
}

// usage is the memory of a process tree.
type usage struct {
	rss  int64 // summed VmRSS now
	peak int64 // the largest VmHWM of one process
	pids []int
}

// used is what the node compares with the limit: a lower bound of the
// tree's peak, so the node never kills a tree that stayed under it.
func (u usage) used() int64 { return max(u.rss, u.peak) }

// treeMemory reads the memory of pid and its descendants. Processes that
// end while it reads are skipped.
func treeMemory(pid int) usage {
	var u usage
	queue := []int{pid}
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		rss, hwm, ok := readMemory(p)
		if !ok {
			continue
		}
		u.rss += rss
		u.peak = max(u.peak, hwm)
		u.pids = append(u.pids, p)
		queue = append(queue, children(p)...)
	}
	return u
}

// readMemory reads VmRSS and VmHWM of /proc/<pid>/status, in bytes.
func readMemory(pid int) (rss, hwm int64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), ":")
		if !found || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	// A zombie has no memory lines and holds none.
	return rss, hwm, true
}

// children lists the child processes of pid, from the children file of
// each of its threads (a child's parent is the thread that forked it).
func children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// oomKill ends the container as the kernel's OOM killer does: SIGKILL to
// its process group and to every process of its tree (some may have left
// the group), reason OOMKilled.
func (p *process) oomKill(pids []int) {
	p.kill(reasonOOMKilled)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// reasonOOMKilled is the kubelet's terminated reason for an OOM kill.
const reasonOOMKilled = "OOMKilled"

// overLimitAtExit reports whether an ended process's peak went over its
// limit, so that it ends OOMKilled although no sample caught it.
//
// wait4's ru_maxrss is not the child's alone: Go starts children with
// clone(CLONE_VM|CLONE_VFORK), and at exec Linux folds the peak of the
// memory the child shared until then (the node's own) into it, so /bin/true
// started from a 300 MiB test process reports 300 MiB. It is the child's
// own peak only when above the node's peak at its start (spawnHWM); at or
// below that it says nothing, and only the samples judge.
func (p *process) overLimitAtExit(state *os.ProcessState) bool {
	if p.memLimit <= 0 || state == nil {
		return false
	}
	peak := peakRSS(state)
	return peak > p.spawnHWM && peak > p.memLimit
}

// sampled records a sample of the container's memory (see usage.used).
func (p *process) sampled(used int64) {
	p.mu.Lock()
	p.peakSampled = max(p.peakSampled, used)
	p.mu.Unlock()
}

// peakMemory is an ended container's peak memory: its own peak as wait4
// reported it where that figure is its own (above the node's peak at its
// start, see overLimitAtExit), else the largest sample. A sample reads
// VmHWM, so only what a process reached in its last interval can be
// missed. fromWait4 says which it is; 0 means no sample was taken (a
// container without a memory limit is not sampled).
func (p *process) peakMemory() (peak int64, fromWait4 bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd.ProcessState != nil {
		if own := peakRSS(p.cmd.ProcessState); own > p.spawnHWM && own >= p.peakSampled {
			return own, true
		}
	}
	return p.peakSampled, false
}

func quantity(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}

// logEnd logs an ended container's outcome with what a kubelet's cAdvisor
// would show: its peak memory against its limit and its CPU time. Load
// runs read these lines (hack/jobbench) for every pod's peak.
func (n *Node) logEnd(key string, p *process) {
	code, reason, _, _ := p.outcome()
	peak, fromWait4 := p.peakMemory()
	from := "samples"
	if fromWait4 {
		from = "wait4"
	}
	var user, sys time.Duration
	if st := p.cmd.ProcessState; st != nil {
		user, sys = st.UserTime(), st.SystemTime()
	}
	n.log.Info("container ended", "pod", key, "exit_code", code, "reason", reason,
		"peak_rss_bytes", peak, "peak_from", from, "memory_limit_bytes", p.memLimit,
		"cpu_user_seconds", user.Seconds(), "cpu_system_seconds", sys.Seconds(),
		"seconds", p.finished.Sub(p.started).Seconds())
}
