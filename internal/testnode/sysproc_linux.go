package testnode

import "syscall"

// sysProcAttr puts a container's processes in their own group (so signals
// reach all of them) and kills them when the node's process dies, so a
// crashed test or `make run` leaves no workers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
