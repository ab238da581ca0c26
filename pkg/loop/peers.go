package loop

import (
	"math"
	"time"
)

// Peer is a consumer instance's lease on a loop: the consumer refreshes it
// every few seconds (pkg/consume's Lease) with the running count of the
// messages it stored since it started. The controller reads every loop's
// peers in the same batched read as the loops (TickStore.LoadLoops) and
// turns the counts into the processed rate of the last tick period; the
// consumers count the live leases to share RATE among the instances that
// actually run.
type Peer struct {
	// Loop is the loop id; Instance the consumer instance's unique id.
	Loop     string `json:"loop"`
	Instance string `json:"instance"`
	// Stored counts the messages the instance stored since StartedAt.
	Stored int64 `json:"stored"`
	// Batches counts the batches the instance worked on since StartedAt,
	// BatchMessages the messages they held, and Working their working time
	// (pacing excluded): the means size an event source mapping (mapping.go).
	Batches       int64         `json:"batches,omitempty"`
	BatchMessages int64         `json:"batch_messages,omitempty"`
	Working       time.Duration `json:"working,omitempty"`
	// StartedAt is when the instance started counting; ReportedAt when it
	// wrote this lease; ExpiresAt when the lease lapses unless refreshed.
	StartedAt  time.Time `json:"started_at"`
	ReportedAt time.Time `json:"reported_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Live reports whether the lease is in force at now.
func (p Peer) Live(now time.Time) bool { return now.Before(p.ExpiresAt) }

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

// Demand is what the consumers' reports said at a tick.
type Demand struct {
	// Stored is each reporting instance's count at this tick: the baseline
	// for the next one.
	Stored map[string]int64 `json:"stored,omitempty"`
	// ReportedAt is when each instance reported its count in Stored.
	ReportedAt map[string]time.Time `json:"reported_at,omitempty"`
	// Processed is the rate the consumers stored since the previous tick,
	// averaged with the previous ticks' over ProcessedSmoothing,
	// messages/s (0 when not Known); Known is false when no consumer reports or the figure
	// cannot be trusted this tick (the first tick, a reporting consumer
	// without a baseline).
	Processed float64 `json:"processed"`
	Known     bool    `json:"known"`
	// Live is the number of live leases.
	Live int `json:"live"`
	// Limited is true when the loop was limited by demand at this tick:
	// the consumers took clearly less than the rate allowed (the queue ran
	// dry, too few consumers), and the controller held the rate near what
	// was taken.
	Limited bool `json:"limited,omitempty"`
}

// measureDemand turns the peers' running counts into the processed rate
// since the previous tick (at prevTick, with the baselines of prev): the sum
// of every count's increase (as of the tick: asOfTick) over the time since
// prevTick (not the controller's capped sampling interval: after an outage
// the counts cover the whole gap). A count below its baseline (an
// instance id reused after a restart) counts from zero. An instance first
// seen now counts whole if it started after the previous tick; if it
// started before, its share of the period is unknown and so is the figure.
// Redelivered messages that a consumer stores again are counted again: the
// figure is what reached the destination, which is what loads it.
func measureDemand(peers []Peer, prev Demand, prevTick, now time.Time) Demand {
	d := Demand{Stored: make(map[string]int64, len(peers)), ReportedAt: make(map[string]time.Time, len(peers)), Live: LivePeers(peers, now)}
	dt := now.Sub(prevTick)
	var sum float64
	known := !prevTick.IsZero() && dt > 0 && (len(peers) > 0 || len(prev.Stored) > 0)
	for _, p := range peers {
		if now.Sub(p.ExpiresAt) > PeerRetention {
			continue
		}
		d.Stored[p.Instance], d.ReportedAt[p.Instance] = p.Stored, p.ReportedAt
		base, ok := prev.Stored[p.Instance]
		switch {
		case ok && p.Stored >= base:
			sum += asOfTick(float64(p.Stored-base), prev.ReportedAt[p.Instance], p.ReportedAt, dt)
		case ok || !p.StartedAt.Before(prevTick):
			sum += float64(p.Stored)
		default:
			known = false
		}
	}
	if len(d.Stored) == 0 {
		d.Stored, d.ReportedAt = nil, nil
	}
	if known {
		d.Processed, d.Known = smoothProcessed(sum/dt.Seconds(), prev, dt), true
	}
	return d
}

// asOfTick rescales n, what a consumer stored between its reports at from
// and to, to the tick's interval dt, when the lease was refreshed through
// the interval (its reports less than a quarter of dt further apart or
// closer than the ticks); otherwise, or without both report times, n as it
// is. A lease refreshed every 2 s covers up to 2 s more or less than the
// tick.
func asOfTick(n float64, from, to time.Time, dt time.Duration) float64 {
	span := to.Sub(from)
	if from.IsZero() || to.IsZero() || span <= 0 || (span-dt).Abs() > dt/4 {
		return n
	}
	return n * dt.Seconds() / span.Seconds()
}

// ProcessedSmoothing is the time constant over which the processed rate is
// averaged. The counts arrive in lumps (batches of up to 10 messages, a
// lease refreshed every 2 s): over a tick of a few seconds at a few messages
// per second per instance one tick reads far below the rate and the next far
// above, and every low tick would tell the controller the loop is limited by
// demand. At a one-minute tick the previous figure weighs e^-2 (14 %).
const ProcessedSmoothing = 30 * time.Second

// smoothProcessed is the exponential average of the processed rate raw
// over dt with the previous tick's figure (exact discretization of a
// first-order filter with time constant ProcessedSmoothing); raw itself when
// there is no previous figure.
func smoothProcessed(raw float64, prev Demand, dt time.Duration) float64 {
	if !prev.Known {
		return raw
	}
	a := math.Exp(-dt.Seconds() / ProcessedSmoothing.Seconds())
	return a*prev.Processed + (1-a)*raw
}
