package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/drift"
	"github.com/sluice-dev/sluice/pkg/history"
)

// historyRecorder keeps one history point per applied tick of the demo, with
// what the consumers took and the queue's depth (as the dashboard records),
// and when the loop first said its model drifted.
type historyRecorder struct {
	file       history.File
	start      time.Time
	driftAt    time.Duration // since the start; -1 while never
	driftRatio float64
	driftWhy   string        // drift.State.Reason
	driftDead  time.Duration // the dead time's estimate, for drift.ReasonDeadTime
}

func newHistoryRecorder(s sim.Scenario) *historyRecorder {
	return &historyRecorder{driftAt: -1, file: history.File{
		Loop: demo.LoopID, TickS: s.Tick.Seconds(), MetricPeriodS: s.MetricPeriod.Seconds(),
		PipelineDelayS: s.PipelineDelay().Seconds(),
	}}
}

// record is a demo.Config.OnTick.
func (h *historyRecorder) record(t demo.Tick) {
	for _, r := range t.Reports {
		p, ok := t.Point(r)
		if !ok {
			continue
		}
		if len(h.file.Points) == 0 {
			h.start = p.T
		}
		if r.ModelDrift && h.driftAt < 0 {
			h.driftAt, h.driftRatio = p.T.Sub(h.start), r.DriftGainRatio
			h.driftWhy, h.driftDead = r.DriftReason, r.DriftDeadTime
		}
		h.file.Points = append(h.file.Points, p)
	}
}

// write writes the history as JSON to path.
func (h *historyRecorder) write(path string) error { return h.file.WriteFile(path) }

// driftJSON is the demo's model-drift figures: when the loop first set
// model_drift (null when never), why (gain or dead_time), the estimated
// gain ratio or dead time, and the ticks from the first plant change.
func (h *historyRecorder) driftJSON(s sim.Scenario) map[string]any {
	out := map[string]any{"set": h.driftAt >= 0, "at_s": nil, "reason": nil, "gain_ratio": nil, "dead_time_s": nil, "ticks_after_change": nil}
	if h.driftAt < 0 {
		return out
	}
	out["at_s"], out["reason"], out["gain_ratio"] = h.driftAt.Seconds(), h.driftWhy, h.driftRatio
	if h.driftWhy == drift.ReasonDeadTime {
		out["dead_time_s"] = h.driftDead.Seconds()
	}
	if len(s.PlantChanges) > 0 {
		out["ticks_after_change"] = int((h.driftAt - firstChange(s)) / s.Tick)
	}
	return out
}

// firstChange is the time of the scenario's first plant change.
func firstChange(s sim.Scenario) time.Duration {
	first := s.PlantChanges[0].At
	for _, c := range s.PlantChanges {
		first = min(first, c.At)
	}
	return first
}

// printDriftNote says whether and when the loop set model_drift.
func printDriftNote(w io.Writer, s sim.Scenario, h *historyRecorder) {
	fmt.Fprintln(w)
	switch {
	case h.driftAt < 0 && len(s.PlantChanges) == 0:
		fmt.Fprintln(w, "model drift: never set (the plant did not change)")
	case h.driftAt < 0:
		fmt.Fprintf(w, "model drift: never set, though the plant changed at %v\n", firstChange(s))
	case len(s.PlantChanges) == 0:
		fmt.Fprintf(w, "model drift: set at %v (%s) though the plant did not change\n", h.driftAt, h.driftFigure())
	default:
		fmt.Fprintf(w, "model drift: set at %v, %d ticks after the plant changed at %v (%s)\n",
			h.driftAt, int((h.driftAt-firstChange(s))/s.Tick), firstChange(s), h.driftFigure())
	}
}

// driftFigure is what moved, as the loop estimated it.
func (h *historyRecorder) driftFigure() string {
	if h.driftWhy == drift.ReasonDeadTime {
		return fmt.Sprintf("plant dead time about %v", h.driftDead)
	}
	return fmt.Sprintf("plant gain / model gain %.2f", h.driftRatio)
}
