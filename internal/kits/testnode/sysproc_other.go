//go:build unix && !linux

package testnode

import (
	"os"
	"syscall"
)

// sysProcAttr puts a container's processes in their own group, so signals
// reach all of them.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// peakRSS is 0: memory limits are enforced on Linux only (/proc).
func peakRSS(*os.ProcessState) int64 { return 0 }
