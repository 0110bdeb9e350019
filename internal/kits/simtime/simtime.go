// Package simtime is a test kit for tests in simulated time
// (testing/synctest): the one way such a test lets time pass.
//
// In a synctest bubble time.Sleep costs no real time: the bubble's clock
// jumps once every goroutine in it is blocked. Outside one the same call
// sleeps on the wall clock, which is what engine tests must not do (the
// tree's check counts time.Sleep in them). Advance is the sleep that
// cannot be a real one: it panics outside a bubble.
package simtime

import (
	"testing/synctest"
	"time"
)

// Advance lets d pass on the bubble's clock and returns once everything
// due by then has run: it waits until every other goroutine of the bubble
// is durably blocked (what the test set in motion has happened), sleeps d,
// which the bubble skips, and waits again (what woke at the new time has
// happened too). Call it from the test's own goroutine; it panics outside
// a synctest bubble, and when another goroutine of the bubble is in
// synctest.Wait.
func Advance(d time.Duration) {
	synctest.Wait()
	time.Sleep(d)
	synctest.Wait()
}
