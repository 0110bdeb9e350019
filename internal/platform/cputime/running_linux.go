package cputime

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc's times (USER_HZ, 100 on Linux).
const userHZ = 100

func running() time.Duration {
	me := strconv.Itoa(os.Getpid())
	return sumProcs(func(_, ppid string) bool { return ppid == me })
}

func named(comm string) time.Duration {
	return sumProcs(func(c, _ string) bool { return c == comm })
}

// sumProcs sums utime + stime of the processes match accepts.
func sumProcs(match func(comm, ppid string) bool) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		if s, ok := parseStat(string(b)); ok && match(s.comm, s.ppid) {
			ticks += s.ticks
		}
	}
	return time.Duration(ticks) * (time.Second / userHZ)
}

type procStat struct {
	comm, ppid string
	ticks      int64 // utime + stime
}

// parseStat reads a /proc/<pid>/stat line: pid (comm) state ppid ...,
// utime and stime being the 12th and 13th fields after the command name,
// whose parentheses may hold anything.
func parseStat(stat string) (procStat, bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(stat[end+1:])
	if len(f) < 13 {
		return procStat{}, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{comm: stat[open+1 : end], ppid: f[1], ticks: u + s}, true
}
