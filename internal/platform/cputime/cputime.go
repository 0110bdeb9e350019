// Package cputime reads the CPU time a process and its children spend, for
// the figures of benchmarks, load tests, hack/ tools and the worker's
// --stats: on a shared machine wall time measures the neighbours too, so
// throughput is reported per CPU-second as well. Where the system cannot
// tell, the times are 0 (and the load average "?"), so a figure computed
// from two readings is never reported.
package cputime

import (
	"os"
	"strings"
	"time"
)

// Self returns the user + system CPU time this process has used.
func Self() time.Duration { return self() }

// Children returns the user + system CPU time of this process's children
// that have ended and been waited for (worker processes, say).
func Children() time.Duration { return children() }

// Running returns the user + system CPU time of this process's children
// still running (a test's kube-apiserver and etcd, say), read from /proc.
func Running() time.Duration { return running() }

// Named returns the user + system CPU time of the machine's running
// processes named comm (as /proc names them: "postgres", say).
func Named(comm string) time.Duration { return named(comm) }

// LoadAverage returns the 1, 5 and 15 minute load averages as the kernel
// prints them ("0.52 0.58 0.59"), to say how busy the machine was.
func LoadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
