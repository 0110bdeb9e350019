//go:build !unix

package fleet

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
