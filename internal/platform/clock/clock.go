// Package clock is the one clock of the engine and the controllers: every
// component that reads the time or waits is given a Clock, and the wiring
// chooses the wall clock once (Wall). A component given none uses Wall
// too, so that a zero Options still works; the wiring passes it anyway, so
// that one place says which clock runs.
//
// Tests need no fake of their own: testing/synctest runs the code in a
// bubble whose time package (and so Wall) is simulated, advancing only when
// every goroutine of the bubble is blocked (internal/kits/simtime). A fake
// is for code that cannot run in a bubble (envtest, real servers).
//
// A Clock is a k8s.io/utils/clock.PassiveClock (Now, Since), so the
// controllers' Clock fields take one as it is; the package imports nothing
// but the standard library (the engine imports no Kubernetes package).
package clock

import (
	"context"
	"time"
)

// Clock reads the time and makes timers.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	Until(t time.Time) time.Duration
	After(d time.Duration) <-chan time.Time
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
	AfterFunc(d time.Duration, f func()) Timer
	Sleep(d time.Duration)
}

// Timer is a time.Timer behind an interface (C is a method).
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker behind an interface.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Wall is the wall clock: the time package itself.
type Wall struct{}

var _ Clock = Wall{}

func (Wall) Now() time.Time                         { return time.Now() }
func (Wall) Since(t time.Time) time.Duration        { return time.Since(t) }
func (Wall) Until(t time.Time) time.Duration        { return time.Until(t) }
func (Wall) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (Wall) Sleep(d time.Duration)                  { time.Sleep(d) }
func (Wall) NewTimer(d time.Duration) Timer         { return wallTimer{time.NewTimer(d)} }
func (Wall) NewTicker(d time.Duration) Ticker       { return wallTicker{time.NewTicker(d)} }
func (Wall) AfterFunc(d time.Duration, f func()) Timer {
	return wallTimer{time.AfterFunc(d, f)}
}

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time        { return w.t.C }
func (w wallTimer) Stop() bool                 { return w.t.Stop() }
func (w wallTimer) Reset(d time.Duration) bool { return w.t.Reset(d) }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time   { return w.t.C }
func (w wallTicker) Stop()                 { w.t.Stop() }
func (w wallTicker) Reset(d time.Duration) { w.t.Reset(d) }

// Or is c, or Wall when c is nil (a component built without the wiring).
func Or(c Clock) Clock {
	if c == nil {
		return Wall{}
	}
	return c
}

// Sleep waits d on c, or until ctx ends (its error then); d <= 0 returns
// at once with ctx's error, if any.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SleepUntil waits until at on c, or until ctx ends.
func SleepUntil(ctx context.Context, c Clock, at time.Time) error {
	return Sleep(ctx, c, c.Until(at))
}
