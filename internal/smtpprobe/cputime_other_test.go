//go:build !unix

package smtpprobe

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
