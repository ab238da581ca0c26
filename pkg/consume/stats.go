package consume

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are a consumer's counters, safe for concurrent use. The worker
// exports them on /metrics; the Lambda logs them as CloudWatch Embedded
// Metric Format.
type Stats struct {
	// Consumed counts messages received from the source.
	Consumed atomic.Int64
	// Stored counts messages the sink stored (and that were acknowledged).
	Stored atomic.Int64
	// Failed counts messages given back for redelivery (not stored):
	// Retried plus Deferred.
	Failed atomic.Int64
	// Retried counts messages given back because the destination failed.
	Retried atomic.Int64
	// Deferred counts messages given back untried (pacing slot past the
	// deadline, rate zero, circuit open, shutdown).
	Deferred atomic.Int64
	// Poison counts messages sent to the dead-letter path.
	Poison atomic.Int64
	// RateFallbacks counts rate reads that fell back to the safe rate.
	RateFallbacks atomic.Int64
	// Withheld counts the messages the inner loop held back below the
	// share while it cut (the rate it withheld, integrated): reported to
	// the controller, whose outer loop must not take the cut for a
	// plant that took less.
	Withheld atomic.Int64
	// Batches counts the batches worked on (stored, retried or
	// dead-lettered in part at least; a batch deferred whole is no work),
	// and BatchMessages the messages they settled; Working is their
	// working time. The lease reports them: the controller sizes an event
	// source mapping by the means (loop.MappingConcurrency).
	Batches       atomic.Int64
	BatchMessages atomic.Int64
	// InnerLatency and InnerReference are the inner loop's filtered store
	// latency per message and its learned reference, ns, as of the last
	// batch (0: no inner loop, or no reference yet): the lease reports them.
	InnerLatency, InnerReference atomic.Int64

	fleet   atomic.Uint64 // float64 bits: the fleet's latency ratio (protocol.FleetLatency)
	fleetN  atomic.Int64  // how many leases it is over
	fleetAt atomic.Int64  // Unix ns of its read (0: none)

	allowed  atomic.Uint64 // float64 bits: the loop's allowed rate
	share    atomic.Uint64 // float64 bits: this consumer's share
	fallback atomic.Bool
	paced    atomic.Int64 // ns spent waiting for pacing slots (rate zero included)
	working  atomic.Int64 // ns of the batches' work, pacing excluded
	circuit  atomic.Int32 // CircuitState

	mu   sync.Mutex
	dead map[string]int64 // poison by ReasonKind
}

// count adds one batch's report.
func (s *Stats) count(rep Report) {
	s.Stored.Add(int64(len(rep.Stored)))
	s.Retried.Add(int64(len(rep.Retry)))
	s.Deferred.Add(int64(len(rep.Deferred)))
	s.Failed.Add(int64(len(rep.Retry) + len(rep.Deferred)))
	s.Poison.Add(int64(len(rep.Poison)))
	if len(rep.Poison) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead == nil {
		s.dead = map[string]int64{}
	}
	for _, p := range rep.Poison {
		s.dead[ReasonKind(p.Reason)]++
	}
}

// ReasonKind sorts a dead-letter reason into a small set for metrics:
// "malformed" (the validator refused it), "id_collision" (an id seen before
// with another body), "retries_exhausted" (a source's attempt budget spent)
// or "refused" (the destination refused its content).
func ReasonKind(reason string) string {
	switch {
	case strings.HasPrefix(reason, "malformed payload"):
		return "malformed"
	case strings.Contains(reason, "id collision"):
		return "id_collision"
	case strings.Contains(reason, "retries exhausted"):
		return "retries_exhausted"
	}
	return "refused"
}

// DeadLettered returns the poison messages counted by ReasonKind.
func (s *Stats) DeadLettered() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.dead))
	for k, v := range s.dead {
		out[k] = v
	}
	return out
}

func (s *Stats) addPaced(d time.Duration) {
	if d > 0 {
		s.paced.Add(int64(d))
	}
}

// AddBatch counts one batch that settled messages in working time
// (pacing excluded).
func (s *Stats) AddBatch(messages int, working time.Duration) {
	s.Batches.Add(1)
	s.BatchMessages.Add(int64(messages))
	s.working.Add(int64(max(working, 0)))
}

// Working returns the total working time of the batches counted by
// AddBatch.
func (s *Stats) Working() time.Duration { return time.Duration(s.working.Load()) }

// Paced returns the total time spent waiting for pacing slots, including
// the time paused at a rate of zero.
func (s *Stats) Paced() time.Duration { return time.Duration(s.paced.Load()) }

func (s *Stats) setCircuit(c CircuitState) { s.circuit.Store(int32(c)) }

// Circuit returns the circuit breaker's state as last seen.
func (s *Stats) Circuit() CircuitState { return CircuitState(s.circuit.Load()) }

func (s *Stats) setAllowed(a Allowed) {
	s.allowed.Store(math.Float64bits(a.Total))
	s.share.Store(math.Float64bits(a.Share))
	s.fallback.Store(a.Fallback)
}

// AllowedRate returns the last allowed aggregate rate and this consumer's
// share of it (messages/s), and whether the safe rate was in force.
func (s *Stats) AllowedRate() (total, share float64, fallback bool) {
	return math.Float64frombits(s.allowed.Load()), math.Float64frombits(s.share.Load()), s.fallback.Load()
}

// setFleet records the fleet's latency ratio over n leases, read at at.
func (s *Stats) setFleet(ratio float64, n int, at time.Time) {
	s.fleet.Store(math.Float64bits(ratio))
	s.fleetN.Store(int64(n))
	s.fleetAt.Store(at.UnixNano())
}

// Fleet returns the loop's latency ratio across its consumers as the
// lease last read it (protocol.FleetLatency), how many leases it is over
// and when it was read: the zero time before any read (the store cannot
// list leases, or this consumer's inner loop runs none).
func (s *Stats) Fleet() (ratio float64, n int, at time.Time) {
	ns := s.fleetAt.Load()
	if ns == 0 {
		return 0, 0, time.Time{}
	}
	return math.Float64frombits(s.fleet.Load()), int(s.fleetN.Load()), time.Unix(0, ns)
}
