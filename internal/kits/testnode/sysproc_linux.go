package testnode

import (
	"os"
	"syscall"
)

// sysProcAttr puts a container's processes in their own group (so signals
// reach all of them) and kills them when the node's process dies, so a
// crashed test or `make run` leaves no workers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// peakRSS is an ended process's peak resident set in bytes, as wait4
// reported it (Linux gives kilobytes): the largest of the process and of
// the descendants it waited for.
func peakRSS(state *os.ProcessState) int64 {
	if ru, ok := state.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}
