package wiring

import "github.com/emaildata/emaildata/internal/platform/clock"

// processClock is the one clock of the processes the wiring builds: the
// wall clock, chosen here and given to every engine component (the fleet,
// the DNS resolver, the SMTP prober and its proxies, the verification
// history, the engine's verdict dates). Tests of those components run them
// in synctest bubbles, where this same clock is simulated.
var processClock clock.Clock = clock.Wall{}

// ProcessClock is that clock, for the manager's reconcilers (their
// requeue and grace logic), which the operator builds.
func ProcessClock() clock.Clock { return processClock }
