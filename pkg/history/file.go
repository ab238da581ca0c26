package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// File is a loop's history as one JSON document: what `sluice demo
// --history-out` writes and `sluice tune --from-history --history-file` and
// `sluice tune --shadow-report` read. Points are one per applied tick, as
// the HIST items hold them; the timing is the measurement's as the loop's
// configuration gives it (the tick, the metric's period and the pipeline
// delay: metric period/2 + publication delay + tick/2), zero when unknown.
// ReadFile also reads a bare JSON array of points.
type File struct {
	Loop           string  `json:"loop"`
	TickS          float64 `json:"tick_s,omitempty"`
	MetricPeriodS  float64 `json:"metric_period_s,omitempty"`
	PipelineDelayS float64 `json:"pipeline_delay_s,omitempty"`
	// Params are the loop's PARAMS attributes at the start (`tune
	// --shadow-report` replays the live gains from them).
	Params map[string]any `json:"params,omitempty"`
	Points []Point        `json:"points"`
}

// WriteFile writes f as JSON to path.
func (f File) WriteFile(path string) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode the history of %s: %w", f.Loop, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// ReadFile reads a history file (a File, or a bare array of points),
// keeping the points of the last since (KeepSince; all when zero).
func ReadFile(path string, since time.Duration) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("read history: %w", err)
	}
	var f File
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &f.Points)
	} else {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		return File{}, fmt.Errorf("history %s: not a history file (an object with points, or an array of points): %w", path, err)
	}
	f.Points = KeepSince(f.Points, since)
	return f, nil
}

// KeepSince returns the points of pts (oldest first) within since before
// the newest one; all of them when since is zero.
func KeepSince(pts []Point, since time.Duration) []Point {
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
