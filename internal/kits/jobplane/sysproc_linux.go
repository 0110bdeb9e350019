package jobplane

import "syscall"

// sysProcAttr kills a component when the process that started it dies, so
// a crashed test or `make run` leaves no controller-manager behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
