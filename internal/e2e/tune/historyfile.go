package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// unsmooth undoes the controller's smoothing of the consumers' processed
// rate (an exponential average over loop.ProcessedSmoothing, exactly
// discretized per tick): the HIST items' consumed rate is that average. At
// a one-minute tick it lags the rate little; at this run's 5-second tick it
// is a 30-second lag on the input of the fit, which the fit does not model.
// A point whose previous consumed rate is unknown is where the average
// restarted, and is kept.
func unsmooth(pts []history.Point) []history.Point {
	out := append([]history.Point(nil), pts...)
	for i := 1; i < len(pts); i++ {
		prev, cur := pts[i-1].Consumed, pts[i].Consumed
		dt := pts[i].T.Sub(pts[i-1].T)
		if math.IsNaN(prev) || math.IsNaN(cur) || dt <= 0 {
			continue
		}
		a := math.Exp(-dt.Seconds() / loop.ProcessedSmoothing.Seconds())
		out[i].Consumed = max(0, (cur-a*prev)/(1-a))
	}
	return out
}

// historyFile is the history file `sluice tune --from-history
// --history-file` and `sluice tune --shadow-report --history-file` read
// (the shape `sluice demo --history-out` writes).
type historyFile struct {
	Loop           string          `json:"loop"`
	TickS          float64         `json:"tick_s"`
	MetricPeriodS  float64         `json:"metric_period_s"`
	PipelineDelayS float64         `json:"pipeline_delay_s"`
	Params         map[string]any  `json:"params"`
	Points         []history.Point `json:"points"`
}

// exportUnsmoothed writes a loop's history since t, its consumed rate
// unsmoothed, and its PARAMS to path. The pipeline delay is the metric
// period/2 + tick/2: the publisher publishes a period's average as it
// ends.
func (r *run) exportUnsmoothed(loopID, path string, t time.Time) error {
	pts, err := r.history(loopID, t)
	if err != nil {
		return err
	}
	attrs, err := r.store.ReadParams(r.ctx, loopID)
	if err != nil {
		return fmt.Errorf("read the PARAMS of %s: %w", loopID, err)
	}
	tick := r.cfg.tick.Seconds()
	b, err := json.Marshal(historyFile{Loop: loopID, TickS: tick, MetricPeriodS: tick, PipelineDelayS: tick, Params: attrs, Points: unsmooth(pts)})
	if err != nil {
		return fmt.Errorf("encode the history of %s: %w", loopID, err)
	}
	return os.WriteFile(path, b, 0o644)
}
