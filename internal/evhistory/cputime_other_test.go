//go:build !unix

package evhistory

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
