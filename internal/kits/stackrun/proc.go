package stackrun

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTick is USER_HZ, 100 on Linux: the unit of /proc/<pid>/stat's times.
const ClockTick = 10 * time.Millisecond

// ProcStat is a process's line of /proc/<pid>/stat, the fields the
// drivers use. A pod of the test node that ended was waited for by the
// stack process, so its CPU is in the stack's CUtime and CStime.
type ProcStat struct {
	Pid, PPid                    int
	Name                         string
	UTime, STime, CUTime, CSTime int64 // clock ticks
}

// CPU is the process's own CPU time.
func (s ProcStat) CPU() time.Duration { return time.Duration(s.UTime+s.STime) * ClockTick }

// ChildrenCPU is the CPU time of the children it waited for.
func (s ProcStat) ChildrenCPU() time.Duration { return time.Duration(s.CUTime+s.CSTime) * ClockTick }

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (ProcStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcStat{}, false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return ProcStat{}, false
	}
	f := strings.Fields(string(b[end+1:])) // f[0] is field 3, state
	if len(f) < 15 {
		return ProcStat{}, false
	}
	num := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	return ProcStat{Pid: pid, PPid: int(num(1)), Name: string(b[open+1 : end]),
		UTime: num(11), STime: num(12), CUTime: num(13), CSTime: num(14)}, true
}
