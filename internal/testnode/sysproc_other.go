//go:build unix && !linux

package testnode

import "syscall"

// sysProcAttr puts a container's processes in their own group, so signals
// reach all of them.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
