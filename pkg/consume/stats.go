package consume

import (
	"math"
	"sync/atomic"
)

// Stats are a consumer's counters, safe for concurrent use. The worker
// exports them on /metrics; the Lambda logs them as CloudWatch Embedded
// Metric Format.
type Stats struct {
	// Consumed counts messages received from the source.
	Consumed atomic.Int64
	// Stored counts messages the sink stored (and that were acknowledged).
	Stored atomic.Int64
	// Failed counts messages released for redelivery (not stored).
	Failed atomic.Int64
	// Poison counts messages sent to the dead-letter path.
	Poison atomic.Int64
	// RateFallbacks counts rate reads that fell back to the safe rate.
	RateFallbacks atomic.Int64

	allowed  atomic.Uint64 // float64 bits: the loop's allowed rate
	share    atomic.Uint64 // float64 bits: this consumer's share
	fallback atomic.Bool
}

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
