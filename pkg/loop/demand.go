package loop

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// observeDemand measures what the consumers took since the previous tick
// from their leases (protocol.Peer) and hands it to the controller as the rate
// the plant really received (control.Input.ActualRate), so that an empty
// queue does not wind the rate up to max_rate. Without reporting consumers
// the controller runs as before, on the CPU alone.
func observeDemand(snap Snapshot, prev *State, now time.Time, in *control.Input, r *Report) Demand {
	var base Demand
	var prevTick time.Time
	if prev != nil {
		base, prevTick = prev.Demand, prev.TickAt
	}
	d := measureDemand(unsettled(snap.Peers, prevTick), base, prevTick, now)
	d.Stored, d.ReportedAt = capBaselines(d.Stored, d.ReportedAt)
	if d.Known {
		d.Allowed = smoothAllowed(prev, base, now.Sub(prevTick))
		in.ActualRate, in.ActualKnown, in.ActualAllowed = d.Processed+d.WithheldRate, true, d.Allowed
		r.Processed, r.ProcessedKnown, r.Withheld = d.Processed, true, d.WithheldRate
	}
	r.LivePeers = d.Live
	r.InnerLatency, r.InnerReference = innerOf(snap.Peers, now)
	return d
}

// PeerSettle is how long after a lease lapsed before a tick that tick has
// surely read its last count (the lease read is eventually consistent):
// the next ticks ignore the lease, and STATE keeps no baseline for it, so
// that STATE holds the instances of about one tick, not of every instance
// seen within protocol.PeerRetention.
const PeerSettle = time.Minute

// MaxBaselines bounds the instances whose counts STATE keeps (Demand and
// the mapping's Counts, about 170 bytes each), so that STATE stays well
// under DynamoDB's 400 KB item limit: past it, the instances that reported
// least recently lose their baseline, and the processed rate is unknown at
// the next tick (the controller then runs on its signals alone) instead of
// the commit failing.
const MaxBaselines = 1500

// unsettled returns the peers whose lease did not lapse PeerSettle or
// more before prevTick (every peer when there is no previous tick).
func unsettled(peers []protocol.Peer, prevTick time.Time) []protocol.Peer {
	if prevTick.IsZero() {
		return peers
	}
	out := make([]protocol.Peer, 0, len(peers))
	for _, p := range peers {
		if !p.ExpiresAt.Before(prevTick.Add(-PeerSettle)) {
			out = append(out, p)
		}
	}
	return out
}

// capBaselines keeps at most MaxBaselines of stored's instances, the most
// recently reported (reported), and drops the others from both maps.
func capBaselines[V any](stored map[string]V, reported map[string]time.Time) (map[string]V, map[string]time.Time) {
	if len(stored) <= MaxBaselines {
		return stored, reported
	}
	ids := slices.Collect(maps.Keys(stored))
	slices.SortFunc(ids, func(a, b string) int { return reported[b].Compare(reported[a]) })
	for _, id := range ids[MaxBaselines:] {
		delete(stored, id)
		delete(reported, id)
	}
	return stored, reported
}

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
	// Withheld is each reporting instance's count of messages its inner
	// loop held back (protocol.Peer.Withheld), the baseline for the next
	// tick; WithheldRate their rate since the previous tick, messages/s,
	// which the controller is told on top of Processed: the inner loop's cut
	// is not a plant that took less (withheld.go).
	Withheld     map[string]int64 `json:"withheld,omitempty"`
	WithheldRate float64          `json:"withheld_rate,omitempty"`
	// Allowed is the rate the consumers were allowed since the previous
	// tick (the rate that tick computed), averaged as Processed is,
	// messages/s: what Processed would read had they taken all of it (0
	// when not known: shadow mode, a paused loop). The controller compares
	// the two (control.Input.ActualAllowed), so that a rate that climbs,
	// which the average of what was taken lags, is not read as a queue
	// that ran dry.
	Allowed float64 `json:"allowed,omitempty"`
	// Taken is, for a member of a destination, the part of its allowed
	// rate that its consumers took (Processed over the rate of the tick
	// before), averaged over ProcessedSmoothing; nil for a loop that is no
	// member. With it a member's one low tick among lumpy counts does not
	// read as limited by demand (share.go).
	Taken *float64 `json:"taken,omitempty"`
	// Depth is, for a member of a destination whose queue's depth was read
	// (depth_queue), that depth at this tick, messages: with the next
	// tick's, the member's producers' rate (share.go); nil otherwise.
	Depth *float64 `json:"depth,omitempty"`
	// Unreported is, for a member of a destination, what its consumers
	// took between their last reports and this tick, messages (the
	// member's rate times the reports' age, share.go's carried): its
	// processed rate counts from the previous tick to this one, the
	// interval over which its queue's depth changed, not from report to
	// report.
	Unreported float64 `json:"unreported,omitempty"`
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
// seen now counts whole (as of the tick) if it started after the previous
// tick; if it started before, its share of the period is unknown and so is
// the figure.
// Redelivered messages that a consumer stores again are counted again: the
// figure is what reached the destination, which is what loads it.
func measureDemand(peers []protocol.Peer, prev Demand, prevTick, now time.Time) Demand {
	d := Demand{Stored: make(map[string]int64, len(peers)), ReportedAt: make(map[string]time.Time, len(peers)), Live: protocol.LivePeers(peers, now)}
	dt := now.Sub(prevTick)
	var sum float64
	known := !prevTick.IsZero() && dt > 0 && (len(peers) > 0 || len(prev.Stored) > 0)
	for _, p := range peers {
		if now.Sub(p.ExpiresAt) > protocol.PeerRetention {
			continue
		}
		d.Stored[p.Instance], d.ReportedAt[p.Instance] = p.Stored, p.ReportedAt
		base, ok := prev.Stored[p.Instance]
		switch {
		case ok && p.Stored >= base:
			sum += asOfTick(float64(p.Stored-base), prev.ReportedAt[p.Instance], p.ReportedAt, dt)
		case ok:
			sum += float64(p.Stored)
		case !p.StartedAt.Before(prevTick):
			// Started since: what it stored as of the tick.
			sum += asOfTick(float64(p.Stored), p.StartedAt, p.ReportedAt, now.Sub(p.StartedAt))
		default:
			known = false
		}
	}
	if len(d.Stored) == 0 {
		d.Stored, d.ReportedAt = nil, nil
	}
	if known {
		d.Processed, d.Known = smoothProcessed(sum/dt.Seconds(), prev, dt), true
		d.Withheld, d.WithheldRate = measureWithheld(peers, prev, dt, now)
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

// allowedInForce is the rate the consumers were allowed since the previous
// tick: the rate that tick computed, unless it was not applied (shadow
// mode) or was zero.
func allowedInForce(prev *State) (float64, bool) {
	if prev == nil || prev.Mode == ModeShadow || prev.Rate <= 0 || math.IsNaN(prev.Rate) || math.IsInf(prev.Rate, 0) {
		return 0, false
	}
	return prev.Rate, true
}

// smoothAllowed is the exponential average of the rate in force over dt
// with the previous tick's figure, with Processed's time constant (the
// rate in force itself when there is no previous figure); 0 when no rate
// was in force.
func smoothAllowed(prev *State, base Demand, dt time.Duration) float64 {
	allowed, ok := allowedInForce(prev)
	if !ok {
		return 0
	}
	if !base.Known || base.Allowed <= 0 {
		return allowed
	}
	a := math.Exp(-dt.Seconds() / ProcessedSmoothing.Seconds())
	return a*base.Allowed + (1-a)*allowed
}
