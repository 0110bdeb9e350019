package s3server

import "syscall"

// sysProcAttr gives the server its own process group and kills it when
// the process that started it dies, so a crashed test or `make run`
// leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
