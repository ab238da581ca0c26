package consume

import (
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
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
	cfg.Threshold = defaults.Positive(cfg.Threshold, 3)
	cfg.Backoff.Base = defaults.Positive(cfg.Backoff.Base, 200*time.Millisecond)
	cfg.Backoff.Max = defaults.Positive(cfg.Backoff.Max, 30*time.Second)
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

// blameMemory bounds how many failed messages a blame remembers; past it
// the memory starts over (failures then count against the destination, as
// without it).
const blameMemory = 4096

// blame tells a message's own failure from the destination's: a batch that
// fails whole, made only of messages that failed before while the
// destination went on taking others, says nothing about the destination
// (one record it chokes on every time, handed back alone after its backoff).
// Counting it would open the circuit, and every half-open probe would take
// that same record and fail it again: the consumer would stall behind one
// record until its retries ran out. It is safe for concurrent use.
type blame struct {
	mu     sync.Mutex
	batch  uint64            // batches noted
	failed map[string]uint64 // message id -> the batch it first failed in (since stored)
	took   uint64            // the last batch of which the destination stored a message
}

// theirs reports whether every message of a batch that failed whole failed
// before, and the destination stored something since (or in the same batch).
func (b *blame) theirs(msgs []Message) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(msgs) == 0 || b.took == 0 {
		return false
	}
	for _, m := range msgs {
		at, ok := b.failed[m.ID]
		if m.ID == "" || !ok || at > b.took {
			return false
		}
	}
	return true
}

// note records a batch's outcome: the stored messages are forgotten, the
// failed ones remembered by the batch they first failed in.
func (b *blame) note(stored, failed []Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batch++
	if len(stored) > 0 {
		b.took = b.batch
	}
	for _, m := range stored {
		delete(b.failed, m.ID)
	}
	if len(b.failed)+len(failed) > blameMemory {
		b.failed = nil
	}
	if b.failed == nil {
		b.failed = make(map[string]uint64, len(failed))
	}
	for _, m := range failed {
		if _, ok := b.failed[m.ID]; !ok && m.ID != "" {
			b.failed[m.ID] = b.batch
		}
	}
}
