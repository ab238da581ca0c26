package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/history"
)

// historyFile is what `sluice demo --history-out` writes and `sluice tune
// --from-history --history-file` reads: the loop's history points, one per
// applied tick, as the HIST items hold them, with the measurement's timing
// that the loop's configuration gives (the tick, the metric's period and the
// pipeline delay: metric period/2 + publication delay + tick/2). A bare
// JSON array of points is read too; the timing then comes from flags.
type historyFile struct {
	Loop           string  `json:"loop"`
	TickS          float64 `json:"tick_s,omitempty"`
	MetricPeriodS  float64 `json:"metric_period_s,omitempty"`
	PipelineDelayS float64 `json:"pipeline_delay_s,omitempty"`
	// Params are the loop's PARAMS attributes at the start (`tune
	// --shadow-report` replays the live gains from them).
	Params map[string]any  `json:"params,omitempty"`
	Points []history.Point `json:"points"`
}

// historyRecorder keeps one history point per applied tick of the demo, with
// what the consumers took and the queue's depth (as the dashboard records),
// and when the loop first said its model drifted.
type historyRecorder struct {
	file       historyFile
	start      time.Time
	driftAt    time.Duration // since the start; -1 while never
	driftRatio float64
}

func newHistoryRecorder(s sim.Scenario) *historyRecorder {
	return &historyRecorder{driftAt: -1, file: historyFile{
		Loop: demo.LoopID, TickS: s.Tick.Seconds(), MetricPeriodS: s.MetricPeriod.Seconds(),
		PipelineDelayS: s.PipelineDelay().Seconds(),
	}}
}

// record is a demo.Config.OnTick.
func (h *historyRecorder) record(t demo.Tick) {
	for _, r := range t.Reports {
		p, ok := history.FromReport(t.Now, r)
		if !ok {
			continue
		}
		p.Consumed, p.Depth = t.Consumed, float64(t.Depth)
		if len(h.file.Points) == 0 {
			h.start = p.T
		}
		if r.ModelDrift && h.driftAt < 0 {
			h.driftAt, h.driftRatio = p.T.Sub(h.start), r.DriftGainRatio
		}
		h.file.Points = append(h.file.Points, p)
	}
}

// write writes the history as JSON to path.
func (h *historyRecorder) write(path string) error {
	b, err := json.Marshal(h.file)
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// readHistoryFile reads a history file (an object as historyFile, or a bare
// array of points), keeping the points of the last since (all when zero).
func readHistoryFile(path string, since time.Duration) (historyFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return historyFile{}, fmt.Errorf("read history: %w", err)
	}
	var f historyFile
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &f.Points)
	} else {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		return historyFile{}, fmt.Errorf("history %s: not a history file (an object with points, or an array of points): %w", path, err)
	}
	f.Points = keepSince(f.Points, since)
	return f, nil
}

// keepSince keeps the points of the last since before the newest one (all
// when since is zero).
func keepSince(pts []history.Point, since time.Duration) []history.Point {
	if since <= 0 || len(pts) == 0 {
		return pts
	}
	from := pts[len(pts)-1].T.Add(-since)
	i := 0
	for i < len(pts) && pts[i].T.Before(from) {
		i++
	}
	return pts[i:]
}

// driftJSON is the demo's model-drift figures: when the loop first set
// model_drift (null when never), the estimated gain ratio, and the ticks
// from the first plant change.
func (h *historyRecorder) driftJSON(s sim.Scenario) map[string]any {
	out := map[string]any{"set": h.driftAt >= 0, "at_s": nil, "gain_ratio": nil, "ticks_after_change": nil}
	if h.driftAt < 0 {
		return out
	}
	out["at_s"], out["gain_ratio"] = h.driftAt.Seconds(), h.driftRatio
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
		fmt.Fprintf(w, "model drift: set at %v (gain ratio %.2f) though the plant did not change\n", h.driftAt, h.driftRatio)
	default:
		fmt.Fprintf(w, "model drift: set at %v, %d ticks after the plant changed at %v (plant gain / model gain %.2f)\n",
			h.driftAt, int((h.driftAt-firstChange(s))/s.Tick), firstChange(s), h.driftRatio)
	}
}
