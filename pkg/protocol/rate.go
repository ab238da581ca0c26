package protocol

import "time"

// Rate is the RATE item: the allowed consumption rate that every consumer of
// a loop reads before each batch. Consumers that find it missing or expired
// fall back to their configured safe rate.
type Rate struct {
	// Loop is the loop id (the item's partition key).
	Loop string `json:"loop"`
	// PerSecond is the allowed aggregate rate over all consumers, messages/s.
	PerSecond float64 `json:"rate"`
	// WrittenAt is when the controller wrote the rate.
	WrittenAt time.Time `json:"written_at"`
	// ExpiresAt is when the rate stops being valid: a consumer that reads it
	// after this instant treats the controller as dead.
	ExpiresAt time.Time `json:"expires_at"`
	// Tick is the controller tick (STATE version) that wrote the rate.
	Tick int64 `json:"tick"`
	// Weights are optional per-node weights for destinations with several
	// nodes (the balancer); nil when the loop has one node.
	Weights map[string]float64 `json:"weights,omitempty"`
}

// Expired reports whether r is no longer valid at now. A rate without an
// expiry never expires.
func (r Rate) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}
