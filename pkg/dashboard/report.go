package dashboard

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// PointFromReport returns the history point of one loop's controller tick at
// t, and false when the tick wrote nothing (lost to another invocation, not
// due, disabled, without parameters, failed). The controller does not know
// the consumed rate or the queue depth: they are NaN. While the metric is
// stale the controller holds its output and does not compute its terms, so
// P, I and FF are NaN (a gap on the chart).
func PointFromReport(t time.Time, r loop.Report) (Point, bool) {
	if r.Outcome != loop.OutcomeApplied {
		return Point{}, false
	}
	p := Point{
		T: t, Setpoint: r.Setpoint, Measured: r.Measured, Rate: r.Rate, Consumed: math.NaN(),
		P: r.P, I: r.I, FF: r.FF, Saturated: r.Saturated, Stale: r.Stale, Depth: math.NaN(), Mode: string(r.Mode),
	}
	if r.Stale {
		p.Measured, p.P, p.I, p.FF = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	}
	return p, true
}
