package protocol

import (
	"math"
	"time"
)

// Peer is a consumer instance's lease on a loop: the consumer refreshes it
// every few seconds (pkg/consume's Lease) with the running count of the
// messages it stored since it started. The controller reads every loop's
// peers in the same batched read as the loops and turns the counts into the
// processed rate of the last tick period; the consumers count the live
// leases to share RATE among the instances that actually run.
type Peer struct {
	// Loop is the loop id; Instance the consumer instance's unique id.
	Loop     string `json:"loop"`
	Instance string `json:"instance"`
	// Stored counts the messages the instance stored since StartedAt.
	Stored int64 `json:"stored"`
	// Batches counts the batches the instance worked on since StartedAt,
	// BatchMessages the messages they held, and Working their working time
	// (pacing excluded): the means size an event source mapping.
	Batches       int64         `json:"batches,omitempty"`
	BatchMessages int64         `json:"batch_messages,omitempty"`
	Working       time.Duration `json:"working,omitempty"`
	// Withheld counts the messages the instance's inner loop held back
	// below its share since StartedAt (consume.InnerLoop): the controller
	// adds their rate to the processed one.
	Withheld int64 `json:"withheld,omitempty"`
	// InnerLatency is the inner loop's filtered store latency per message
	// and InnerReference the latency it learned at the setpoint, at
	// ReportedAt: 0 while the instance runs no inner loop (the reference
	// also before it has learned one). The dashboard charts them.
	InnerLatency   time.Duration `json:"inner_latency,omitempty"`
	InnerReference time.Duration `json:"inner_reference,omitempty"`
	// StartedAt is when the instance started counting; ReportedAt when it
	// wrote this lease; ExpiresAt when the lease lapses unless refreshed.
	StartedAt  time.Time `json:"started_at"`
	ReportedAt time.Time `json:"reported_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Live reports whether the lease is in force at now.
func (p Peer) Live(now time.Time) bool { return now.Before(p.ExpiresAt) }

// BatchCount returns the peer's running batch count.
func (p Peer) BatchCount() BatchCount {
	return BatchCount{Batches: p.Batches, Messages: p.BatchMessages, Working: p.Working}
}

// LivePeers counts the leases of peers in force at now.
func LivePeers(peers []Peer, now time.Time) int {
	n := 0
	for _, p := range peers {
		if p.Live(now) {
			n++
		}
	}
	return n
}

// PeerRetention is how long after its lease lapsed a peer's count still
// counts toward the processed rate (its last refresh may come after the
// previous tick). Older leases are ignored; stores may delete them (a TTL).
const PeerRetention = 10 * time.Minute

// BatchCount is a consumer instance's running count of its batches
// (Peer): how many, how many messages they held, and their working time.
type BatchCount struct {
	Batches  int64         `json:"batches"`
	Messages int64         `json:"messages"`
	Working  time.Duration `json:"working"`
}

// LiveBucket is the width of the time buckets of the version 2 live
// count: a consumer adds itself once to the count of every bucket in which
// it refreshes its lease, and at least once per bucket while it runs; the
// live count at a time is the larger of its bucket's count and the
// previous bucket's. An instance is then counted from its first refresh
// and for one to two buckets after its last (7 to 14 s): an instance that
// stops without closing its lease leaves the count before its lease of
// the default 15 s TTL would lapse, so that after a scale-down the
// survivors take their share as soon as they did with version 1 leases.
const LiveBucket = 7 * time.Second

// BucketOf is the number of t's live-count bucket: whole LiveBuckets since
// the Unix epoch.
func BucketOf(t time.Time) int64 { return t.Unix() / int64(LiveBucket/time.Second) }

// LiveCount is the live count at a time from the counts of its bucket
// (cur) and of the previous one (prev), plus the legacy instances RATE
// reports.
func LiveCount(prev, cur int64, legacy int) int { return int(max(prev, cur, 0)) + max(legacy, 0) }

// FleetLatency is the loop's latency ratio across its consumers at now: the
// geometric mean, over the leases in force whose inner loop has a
// reference, of InnerLatency / InnerReference, and how many leases it is
// over (ratio 0 when none). One consumer's filtered latency swings with how
// many of its peers' batches run beside it; the mean over the fleet does
// not, and it still rises within seconds when the destination slows down.
func FleetLatency(peers []Peer, now time.Time) (ratio float64, n int) {
	sum := 0.0
	for _, p := range peers {
		if !p.Live(now) || p.InnerLatency <= 0 || p.InnerReference <= 0 {
			continue
		}
		sum += math.Log(float64(p.InnerLatency) / float64(p.InnerReference))
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return math.Exp(sum / float64(n)), n
}
