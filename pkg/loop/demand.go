package loop

import (
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// observeDemand measures what the consumers took since the previous tick
// from their leases (peers.go) and hands it to the controller as the rate
// the plant really received (control.Input.ActualRate), so that an empty
// queue does not wind the rate up to max_rate. Without reporting consumers
// the controller runs as before, on the CPU alone.
func observeDemand(snap Snapshot, prev *State, now time.Time, in *control.Input, r *Report) Demand {
	var base Demand
	var prevTick time.Time
	if prev != nil {
		base, prevTick = prev.Demand, prev.TickAt
	}
	d := measureDemand(snap.Peers, base, prevTick, now)
	if d.Known {
		in.ActualRate, in.ActualKnown = d.Processed, true
		r.Processed, r.ProcessedKnown = d.Processed, true
	}
	r.LivePeers = d.Live
	return d
}
