package sim

import "math"

// Counts are the message counters of a run, each kept by a different part
// (producers, queue, consumers, destination), so that a part that drops
// messages shows up as Lost > 0.
type Counts struct {
	// Produced counts the backlog plus every message the producers sent.
	Produced int64 `json:"produced"`
	// Processed counts the messages the destination completed.
	Processed int64 `json:"processed"`
	// InFlight counts messages taken by consumers and not yet completed.
	InFlight int64 `json:"in_flight"`
	// Queued is the queue's length.
	Queued int64 `json:"queued"`
}

// Lost is Produced - Processed - InFlight - Queued: zero unless a message
// disappeared.
func (c Counts) Lost() int64 { return c.Produced - c.Processed - c.InFlight - c.Queued }

// producers send messages at a rate, with fractional accumulation.
type producers struct {
	rate   float64
	credit float64
	sent   int64
}

func (p *producers) produce(dt float64) int64 {
	p.credit += p.rate * dt
	n := int64(math.Floor(p.credit))
	p.credit -= float64(n)
	p.sent += n
	return n
}

// queue is a FIFO of identical messages: only its length matters.
type queue struct{ length int64 }

func (q *queue) push(n int64) { q.length += n }

func (q *queue) take(n int64) int64 {
	n = min(n, q.length)
	q.length -= n
	return n
}

// consumers take up to the allowed rate from the queue each step; the batch
// they take is processed by the destination during the next step.
type consumers struct {
	credit   float64
	inFlight int64
	// dropEvery, when positive, makes every dropEvery-th batch vanish: a
	// deliberately lossy consumer for the tests of the loss counter.
	dropEvery int
	batches   int
}

// step completes the batch in flight (returned as done) and takes a new one
// at rate allowed.
func (c *consumers) step(q *queue, allowed, dt float64) (done, taken int64) {
	done = c.inFlight
	c.inFlight = 0
	c.credit += math.Max(0, allowed) * dt
	want := int64(math.Floor(c.credit))
	taken = q.take(want)
	c.credit -= float64(taken)
	// Unused credit does not accumulate beyond one step's worth.
	c.credit = math.Min(c.credit, math.Max(1, allowed*dt))
	c.batches++
	if c.dropEvery > 0 && c.batches%c.dropEvery == 0 {
		return done, taken // the batch is lost: neither in flight nor queued
	}
	c.inFlight = taken
	return done, taken
}

// sink is the destination's completion counter.
type sink struct{ processed int64 }

func (s *sink) complete(n int64) { s.processed += n }
