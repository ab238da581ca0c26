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
	// CircuitOpen: the destination failed Threshold batches in a row, or
	// most of the recent messages (BreakerConfig); the consumer takes no
	// messages until the backoff has passed.
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

// The defaults of BreakerConfig's ratio rules.
const (
	// DefaultBreakerWindow is the default BreakerConfig.Window: five
	// batches of ten, so that the rules react within a few batches.
	DefaultBreakerWindow = 50
	// DefaultBreakerMinResults is the default BreakerConfig.MinResults: two
	// batches of ten, so that one bad message, or one bad batch, trips
	// nothing.
	DefaultBreakerMinResults = 20
	// DefaultBreakerFailureRatio is the default BreakerConfig.FailureRatio:
	// more than half of the recent messages failed transiently. A healthy
	// destination fails a few; a brownout (90 % answered 429/503) is far
	// above.
	DefaultBreakerFailureRatio = 0.5
	// DefaultBreakerPoisonRatio is the default BreakerConfig.PoisonRatio:
	// more than half of the recent messages refused as poison, far above
	// the odd bad record.
	DefaultBreakerPoisonRatio = 0.5
)

// BreakerConfig configures a Breaker. The circuit opens on any of three
// rules: Threshold whole batches failed in a row; more than FailureRatio of
// the last Window messages failed transiently (a brownout); more than
// PoisonRatio of them refused as poison (a destination fault, not the
// messages': they are held, not dead-lettered). The ratio rules count only
// once the window holds MinResults messages.
type BreakerConfig struct {
	// Threshold is how many batches in a row must fail at the destination
	// (nothing stored, the destination's fault) before the circuit opens
	// (default 3).
	Threshold int
	// Backoff sets the wait after each failed batch (equal jitter, growing
	// with the failures in a row); default 200 ms doubling up to 30 s.
	Backoff Backoff
	// Window is how many of the most recent messages the destination
	// answered the ratio rules look at (default DefaultBreakerWindow).
	Window int
	// MinResults is the fewest messages in the window before the ratio
	// rules count (default DefaultBreakerMinResults, at most Window).
	MinResults int
	// FailureRatio opens the circuit when more than this share of the
	// window failed transiently: throttles, 5xx, timeouts (default
	// DefaultBreakerFailureRatio).
	FailureRatio float64
	// PoisonRatio opens the circuit when more than this share of the
	// window was refused as poison by the sink (default
	// DefaultBreakerPoisonRatio); the refused messages are then handed back
	// instead of dead-lettered.
	PoisonRatio float64
}

// Breaker is a circuit breaker on the destination: after Threshold batches
// in a row that the destination failed, or once most of the recent
// messages failed (see BreakerConfig), the consumer stops taking messages
// (it would only spend their delivery budget: SQS receive counts, Kafka
// attempts) and probes the destination with one small batch after a backoff
// that grows with every failed probe. Before the threshold, a failed batch
// is followed by the same growing backoff, so that a consumer never spins
// on a destination that is down. It is safe for concurrent use.
type Breaker struct {
	cfg   BreakerConfig
	clock Clock

	mu        sync.Mutex
	failures  int       // failed batches in a row
	since     time.Time // the first of them (zero: none)
	lastFail  time.Time // the last of them
	openUntil time.Time
	window    window
}

// Trip is the rule that opened the circuit after a batch.
type Trip int

const (
	// NoTrip: the batch opened nothing.
	NoTrip Trip = iota
	// TripFailing: most recent messages failed transiently (a brownout).
	TripFailing
	// TripPoison: most recent messages were refused as poison.
	TripPoison
)

// NewBreaker returns a closed Breaker.
func NewBreaker(cfg BreakerConfig, clock Clock) *Breaker {
	cfg.Threshold = defaults.Positive(cfg.Threshold, 3)
	cfg.Backoff.Base = defaults.Positive(cfg.Backoff.Base, 200*time.Millisecond)
	cfg.Backoff.Max = defaults.Positive(cfg.Backoff.Max, 30*time.Second)
	cfg.Window = defaults.Positive(cfg.Window, DefaultBreakerWindow)
	cfg.MinResults = min(defaults.Positive(cfg.MinResults, DefaultBreakerMinResults), cfg.Window)
	cfg.FailureRatio = defaults.Positive(cfg.FailureRatio, DefaultBreakerFailureRatio)
	cfg.PoisonRatio = defaults.Positive(cfg.PoisonRatio, DefaultBreakerPoisonRatio)
	return &Breaker{cfg: cfg, clock: clock, window: window{ring: make([]Outcome, cfg.Window)}}
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
	b.close()
}

// close forgets the failures in a row: the destination works.
func (b *Breaker) close() {
	b.failures, b.openUntil, b.since, b.lastFail = 0, time.Time{}, time.Time{}, time.Time{}
}

// Failure records a batch that the destination failed as a whole and
// returns the wait before the next one.
func (b *Breaker) Failure() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failing(b.clock.Now())
	b.failures++
	return b.backoff()
}

// failing notes a failure at now in the outage's age. A failure long
// after the previous one while the circuit is still closed (more than
// twice the longest backoff: the consumer took nothing meanwhile, a quiet
// queue) starts a new outage: a stale failure or two must not make a new
// outage look old.
func (b *Breaker) failing(now time.Time) {
	stale := b.failures < b.cfg.Threshold && now.Sub(b.lastFail) > 2*b.cfg.Backoff.Max
	if b.since.IsZero() || stale {
		b.since = now
	}
	b.lastFail = now
}

// Failing reports whether the destination is failing, as FailingFor
// counts it: a batch failed since the destination last worked well.
func (b *Breaker) Failing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.since.IsZero()
}

// FailingFor returns how long the destination has been failing: the time
// since the first of the batches failed in a row (the outage's age, as
// this consumer saw it), through the open circuit and its failed probes;
// 0 once the destination works well again (Success, or Observe's window:
// closeAfter). The SQS Lambda grows the visibility of what it
// hands back with it.
func (b *Breaker) FailingFor() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.since.IsZero() {
		return 0
	}
	return max(b.clock.Now().Sub(b.since), 0)
}

// backoff sets the wait after b.failures failures in a row and returns it.
func (b *Breaker) backoff() time.Duration {
	d := b.cfg.Backoff.EqualJitter(b.failures)
	b.openUntil = b.clock.Now().Add(d)
	return d
}

// Observe records a batch the destination answered, counted per message
// (stored, failed transiently, refused as poison), and returns the ratio
// rule that opened the circuit, if any. A batch that opens nothing closes
// the circuit, as Success does, but the outage's age goes on until the
// window shows the destination well (closeAfter). A half-open probe that stores
// closes the circuit and starts the window over, so that the failures from
// before the circuit opened do not open it again at once.
func (b *Breaker) Observe(stored, failed, poison int) Trip {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if b.failures >= b.cfg.Threshold && stored > 0 {
		b.window.reset()
		b.window.add(stored, failed, poison)
		b.closeAfter(now)
		return NoTrip
	}
	b.window.add(stored, failed, poison)
	trip := b.trip()
	if trip == NoTrip {
		b.closeAfter(now)
		return NoTrip
	}
	b.failing(b.clock.Now())
	b.failures = max(b.failures, b.cfg.Threshold-1) + 1
	b.backoff()
	return trip
}

// closeAfter closes the circuit after a batch the destination answered.
// The outage's age (FailingFor) ends with it only once the window shows a
// destination that works: at least half of MinResults messages (a batch
// after the probe), at most half of FailureRatio of them failed
// transiently. Until then (a probe that
// stored one message in a brownout, the next batches that fail most) the
// age goes on: a brownout is one outage, however often its probes store.
// A window that fails more than FailureRatio starts one, however few
// messages it holds (the first batches of an instance that started in a
// brownout): too few to open the circuit, enough to hand back what failed
// as in an outage.
func (b *Breaker) closeAfter(now time.Time) {
	since := b.since
	w := &b.window
	failed := float64(w.count[Retryable])
	well := w.n >= max(b.cfg.MinResults/2, 1) && failed <= b.cfg.FailureRatio/2*float64(w.n)
	b.close()
	if well {
		return
	}
	if since.IsZero() && failed > b.cfg.FailureRatio*float64(w.n) {
		since = now
	}
	if !since.IsZero() {
		b.since, b.lastFail = since, now
	}
}

// Note adds the messages of a batch failed as a whole to the window
// without judging it (Failure does).
func (b *Breaker) Note(failed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.window.add(0, failed, 0)
}

// trip returns the ratio rule the window breaks.
func (b *Breaker) trip() Trip {
	n := b.window.n
	switch {
	case n < b.cfg.MinResults:
		return NoTrip
	case float64(b.window.count[Permanent]) > b.cfg.PoisonRatio*float64(n):
		return TripPoison
	case float64(b.window.count[Retryable]) > b.cfg.FailureRatio*float64(n):
		return TripFailing
	}
	return NoTrip
}

// window is the outcomes of the most recent messages, a ring.
type window struct {
	ring  []Outcome
	next  int // where the next outcome goes
	n     int // outcomes held, at most len(ring)
	count [Permanent + 1]int
}

// add appends stored, failed and poison outcomes, dropping the oldest.
func (w *window) add(stored, failed, poison int) {
	for o, k := range [...]int{Stored: stored, Retryable: failed, Permanent: poison} {
		for range k {
			if w.n == len(w.ring) {
				w.count[w.ring[w.next]]--
			} else {
				w.n++
			}
			w.ring[w.next] = Outcome(o)
			w.count[o]++
			w.next = (w.next + 1) % len(w.ring)
		}
	}
}

// reset forgets every outcome.
func (w *window) reset() { w.next, w.n, w.count = 0, 0, [Permanent + 1]int{} }

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
