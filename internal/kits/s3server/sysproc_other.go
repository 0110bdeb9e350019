//go:build unix && !linux

package s3server

import "syscall"

// sysProcAttr gives the server its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
