package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	Loop           string          `json:"loop"`
	TickS          float64         `json:"tick_s,omitempty"`
	MetricPeriodS  float64         `json:"metric_period_s,omitempty"`
	PipelineDelayS float64         `json:"pipeline_delay_s,omitempty"`
	Points         []history.Point `json:"points"`
}

// historyRecorder keeps one history point per applied tick of the demo, with
// what the consumers took and the queue's depth (as the dashboard records).
type historyRecorder struct{ file historyFile }

func newHistoryRecorder(s sim.Scenario) *historyRecorder {
	return &historyRecorder{file: historyFile{
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
