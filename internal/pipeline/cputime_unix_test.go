//go:build unix

package pipeline

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time used by this process. The
// benchmarks report throughput per CPU-second as well as per wall-second,
// because on a busy machine wall time measures the neighbours.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
