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
	// Version is the protocol version of the controller that wrote the
	// item (Version); 1 when the item has none (a controller that predates
	// the field). It tells a consumer which lease layout the controller
	// reads (LeaseLayout).
	Version int `json:"v,omitempty"`
	// LegacyLive is the number of live consumer instances at the tick that
	// keep only a version 1 lease (consumers of an older release, during a
	// rolling deploy): a consumer that counts its peers by the version 2
	// live counts adds it. 0 when there are none.
	LegacyLive int `json:"legacy_live,omitempty"`
	// Inner, when set, turns on the consumers' inner loop on their sink's
	// latency with these settings (the loop's PARAMS inner_loop); nil when
	// it is off. A consumer that does not know it ignores it.
	Inner *InnerSettings `json:"inner,omitempty"`
}

// InnerSettings are the settings of the consumers' inner loop that the
// controller publishes in RATE.
type InnerSettings struct {
	// Tolerance is the rise of the latency per message, relative to the one
	// learned at the setpoint, at which the inner loop cuts.
	Tolerance float64 `json:"tolerance"`
	// Trip, when set, is the rise that engages the cut instead; the
	// tolerance still judges the share's steadiness. 0 (or a controller of
	// an older release): the tolerance.
	Trip float64 `json:"trip,omitempty"`
	// ReactionTime is the integral time of the cut.
	ReactionTime time.Duration `json:"reaction_time"`
	// Settle is how long the share must hold steady before the consumers
	// learn the latency at the setpoint: three of the loop's ticks. 0 (a
	// controller of an older release): the consumers' default.
	Settle time.Duration `json:"settle,omitempty"`
	// Unsettled is true when the loop's newest datapoint is missing, stale
	// or more than InnerSettledBand points from the setpoint: the
	// consumers then learn no latency reference (and restart their wait
	// for a settled share), so that a burst the controller has seen, or a
	// start-up ramp, is not taken for the latency at the setpoint. False
	// (a controller of an older release never sets it): the consumers
	// judge by the share alone.
	Unsettled bool `json:"unsettled,omitempty"`
}

// InnerSettledBand is how far from the setpoint, in points, the loop's
// newest datapoint may be for the controller to call the loop settled
// (InnerSettings.Unsettled false).
const InnerSettledBand = 5.0

// LeaseLayout is the lease layout a consumer writes and counts by when it
// read r: the highest layout it knows (LatestLayout) that the controller
// reads (r.Version, 1 when absent).
func (r Rate) LeaseLayout() int { return min(max(r.Version, 1), LatestLayout) }

// Expired reports whether r is no longer valid at now. A rate without an
// expiry never expires.
func (r Rate) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}
