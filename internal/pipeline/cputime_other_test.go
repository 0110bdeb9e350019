//go:build !unix

package pipeline

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
