package callback

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff schedules retries of failed deliveries. The controller makes one
// attempt per reconcile, records the attempt count in status, and requeues
// after Delay(attempts) until Exhausted(attempts).
//
// Example with Base 10s, Max 5m, Attempts 5: the first attempt fails
// (attempts=1), the retry waits Delay(1)=10s; then 20s, 40s, 80s; after the
// fifth attempt Exhausted(5) is true and the callback is marked failed.
type Backoff struct {
	// Base is the delay before the first retry. Non-positive means no delay.
	Base time.Duration
	// Max caps every delay. Non-positive means uncapped (up to overflow).
	Max time.Duration
	// Attempts is the total number of attempts allowed, including the first.
	// Values below 1 mean 1: a zero Backoff never retries rather than
	// retrying forever.
	Attempts int
	// Jitter, in [0, 1], randomly shortens each delay by up to that fraction
	// so many failing callbacks do not retry in lockstep. 0 (the default)
	// makes Delay deterministic.
	Jitter float64
}

// Delay returns how long to wait before retry number attempt (1-based; values
// below 1 are treated as 1): Base·2^(attempt-1), capped at Max, then
// shortened by the jitter, if any. It never exceeds Max.
func (b Backoff) Delay(attempt int) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	if attempt < 1 {
		attempt = 1
	}
	d := b.Base
	for i := 1; i < attempt; i++ {
		if b.Max > 0 && d >= b.Max {
			break
		}
		if d > math.MaxInt64/2 {
			d = math.MaxInt64
			break
		}
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	if j := min(b.Jitter, 1); j > 0 {
		span := time.Duration(float64(d) * j)
		if span < 0 || span > d { // float rounding near MaxInt64
			span = d
		}
		if span > 0 {
			d -= rand.N(span)
		}
	}
	return d
}

// Exhausted reports whether attempts (the number already made) has used up
// the budget, i.e. no further attempt should be made.
func (b Backoff) Exhausted(attempts int) bool {
	return attempts >= max(b.Attempts, 1)
}
