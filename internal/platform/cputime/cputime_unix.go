//go:build unix

package cputime

import (
	"syscall"
	"time"
)

func rusage(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func self() time.Duration     { return rusage(syscall.RUSAGE_SELF) }
func children() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }
