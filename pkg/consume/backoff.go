package consume

import (
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// Backoff is the project's one retry policy: exponential backoff with full
// jitter (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015).
// Attempt n (n >= 1 is the first retry) waits a uniform random time in
// [0, min(Max, Base x 2^(n-1))). Full jitter spreads the retries of many
// consumers that failed together (a database failover) instead of sending
// them back in waves. The HTTP sink's retries, the worker's pause after a
// failed batch, the SQS visibility of a released message and the Kafka
// source's per-record retry all use it.
type Backoff struct {
	// Base is the ceiling of the first retry's wait (default 100 ms).
	Base time.Duration
	// Max caps every wait (default 20 s).
	Max time.Duration
	// Jitter, when set, replaces the uniform draw: it gets the ceiling and
	// returns a wait in [0, ceiling]. Tests set it to make waits exact.
	Jitter func(ceiling time.Duration) time.Duration
}

// DefaultBackoff returns the policy's defaults: 100 ms, doubling, capped at
// 20 s.
func DefaultBackoff() Backoff { return Backoff{Base: 100 * time.Millisecond, Max: 20 * time.Second} }

// Ceiling returns the largest wait of attempt n: min(Max, Base x 2^(n-1)),
// at least Base.
func (b Backoff) Ceiling(n int) time.Duration {
	base := defaults.Positive(b.Base, DefaultBackoff().Base)
	maxWait := defaults.Positive(b.Max, DefaultBackoff().Max)
	c := base << min(max(n-1, 0), 30)
	if c <= 0 || c > maxWait {
		c = maxWait
	}
	return c
}

// Delay returns the wait before attempt n (n >= 1): full jitter under
// Ceiling(n).
func (b Backoff) Delay(n int) time.Duration {
	c := b.Ceiling(n)
	if b.Jitter != nil {
		return min(max(b.Jitter(c), 0), c)
	}
	return rand.N(c)
}

// EqualJitter returns a wait in [Ceiling(n)/2, Ceiling(n)): half fixed, half
// random. It suits a wait that must grow with n for sure (an SQS visibility
// timeout that keeps a message away while its destination is down), where
// full jitter could draw a near-zero wait after many failures.
func (b Backoff) EqualJitter(n int) time.Duration {
	c := b.Ceiling(n)
	half := c / 2
	if b.Jitter != nil {
		return half + min(max(b.Jitter(c-half), 0), c-half)
	}
	return half + rand.N(c-half+1)
}
