package main

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
)

// export writes a loop's history since t and its PARAMS to path as a
// history file (`sluice tune --from-history --history-file` and `sluice tune
// --shadow-report --history-file` read it). The points are the HIST items as
// stored: their consumed rate is the controller's average, marked so
// (history.Point.ConsumedSmoothing), which `sluice tune` undoes. The
// pipeline delay is the metric period/2 + tick/2: the publisher publishes a
// period's average as it ends.
func (r *run) export(loopID, path string, t time.Time) error {
	pts, err := r.history(loopID, t)
	if err != nil {
		return err
	}
	attrs, err := r.store.ReadParams(r.Ctx, loopID)
	if err != nil {
		return fmt.Errorf("read the PARAMS of %s: %w", loopID, err)
	}
	tick := r.Cfg.Tick.Seconds()
	f := history.File{Loop: loopID, TickS: tick, MetricPeriodS: tick, PipelineDelayS: tick, Params: attrs, Points: pts}
	return f.WriteFile(path)
}
