//go:build !unix

package listfile

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
