package consume

import (
	"sync"
	"time"
)

// CircuitState is the state of a Breaker.
type CircuitState int

const (
	// CircuitClosed: the destination works; messages flow.
	CircuitClosed CircuitState = iota
	// CircuitOpen: the destination failed Threshold batches in a row; the
	// consumer takes no messages until the backoff has passed.
	CircuitOpen
	// CircuitHalfOpen: the backoff has passed; one small batch probes the
	// destination. Its success closes the circuit, its failure opens it
	// again for a longer backoff.
	CircuitHalfOpen
)

// String returns the state's name.
func (s CircuitState) String() string {
	switch s {
	case CircuitClosed:
		return "closed"
	case CircuitOpen:
		return "open"
	case CircuitHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// BreakerConfig configures a Breaker.
type BreakerConfig struct {
	// Threshold is how many batches in a row must fail at the destination
	// (nothing stored, the destination's fault) before the circuit opens
	// (default 3).
	Threshold int
	// Backoff sets the wait after each failed batch (equal jitter, growing
	// with the failures in a row); default 200 ms doubling up to 30 s.
	Backoff Backoff
}

// Breaker is a circuit breaker on the destination: after Threshold batches
// in a row that the destination failed, the consumer stops taking messages
// (it would only spend their delivery budget: SQS receive counts, Kafka
// attempts) and probes the destination with one small batch after a backoff
// that grows with every failed probe. Before the threshold, a failed batch
// is followed by the same growing backoff, so that a consumer never spins
// on a destination that is down. It is safe for concurrent use.
type Breaker struct {
	cfg   BreakerConfig
	clock Clock

	mu        sync.Mutex
	failures  int // failed batches in a row
	openUntil time.Time
}

// NewBreaker returns a closed Breaker.
func NewBreaker(cfg BreakerConfig, clock Clock) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = 3
	}
	if cfg.Backoff.Base <= 0 {
		cfg.Backoff.Base = 200 * time.Millisecond
	}
	if cfg.Backoff.Max <= 0 {
		cfg.Backoff.Max = 30 * time.Second
	}
	return &Breaker{cfg: cfg, clock: clock}
}

// State returns the circuit's state now.
func (b *Breaker) State() CircuitState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state(b.clock.Now())
}

func (b *Breaker) state(now time.Time) CircuitState {
	switch {
	case b.failures < b.cfg.Threshold:
		return CircuitClosed
	case now.Before(b.openUntil):
		return CircuitOpen
	}
	return CircuitHalfOpen
}

// Wait returns how long the consumer must wait before it takes messages
// again (0: now), after a failed batch or while the circuit is open.
func (b *Breaker) Wait() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.openUntil.Sub(b.clock.Now()), 0)
}

// Probing reports whether the next batch is a probe of a destination that
// was down (the circuit is half-open): the consumer takes one message.
func (b *Breaker) Probing() bool { return b.State() == CircuitHalfOpen }

// Success records a batch of which the destination stored something (or
// refused only for content): the circuit closes.
func (b *Breaker) Success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = 0
	b.openUntil = time.Time{}
}

// Failure records a batch that the destination failed as a whole and
// returns the wait before the next one.
func (b *Breaker) Failure() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	d := b.cfg.Backoff.EqualJitter(b.failures)
	b.openUntil = b.clock.Now().Add(d)
	return d
}
