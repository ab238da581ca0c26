package sim

import (
	"math"
	"time"
)

// StableWithin is how soon after a plant change the true CPU must be back
// within SettlingBand of the setpoint, for good, for the loop to count as
// stable on the changed plant.
const StableWithin = 15 * time.Minute

// ChangeResponse is how a run answered one plant change, from the plant's
// true CPU between the change and the next event (or the end).
type ChangeResponse struct {
	AtS float64 `json:"at_s"`
	// SettleS is the time after the change at which the CPU entered the
	// settling band for good; nil when it never did (oscillation, offset).
	SettleS *float64 `json:"settle_s"`
	// PeakPP is the largest |CPU - setpoint| after the change: the jump
	// that no controller avoids, since it learns of the change through the
	// metric pipeline.
	PeakPP float64 `json:"peak_pp"`
	// OvershootPP is the largest excess of the CPU over the setpoint after
	// it first came back to the setpoint: how far the recovery overshoots.
	OvershootPP float64 `json:"overshoot_pp"`
	// Stable reports that the CPU settled within StableWithin.
	Stable bool `json:"stable"`
}

// PlantChangeResponses measures the response to each plant change of
// scenario s in series ser.
func PlantChangeResponses(s Scenario, ser Series) []ChangeResponse {
	ev := s.Events()
	var out []ChangeResponse
	for i, e := range ev {
		if e.Kind != EventPlantChange {
			continue
		}
		r := changeResponse(ser, e.At, s.eventEnd(ev, i))
		out = append(out, r)
	}
	return out
}

// changeResponse measures one plant change at from, up to to.
func changeResponse(ser Series, from, to time.Duration) ChangeResponse {
	r := ChangeResponse{AtS: from.Seconds(), SettleS: settlingTime(ser, from, to)}
	r.Stable = r.SettleS != nil && *r.SettleS <= StableWithin.Seconds()
	f, t := from.Seconds(), to.Seconds()
	dir, back := 0.0, false
	for i, x := range ser.T {
		if x <= f || x > t {
			continue
		}
		e := ser.CPU[i] - ser.Setpoint[i]
		r.PeakPP = math.Max(r.PeakPP, math.Abs(e))
		if dir == 0 && math.Abs(e) > SettlingBand {
			dir = math.Copysign(1, e) // the way the change pushed the CPU
		}
		if dir != 0 && !back && e*dir <= 0 {
			back = true
		}
		if back || dir == 0 {
			r.OvershootPP = math.Max(r.OvershootPP, e)
		}
	}
	return r
}
