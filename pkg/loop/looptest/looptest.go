// Package looptest helps test code that runs the loop's tick: a metric
// reader with fixed values, so that a Ticker runs without CloudWatch or
// Prometheus.
package looptest

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// Metrics is a metric.Reader that answers with fixed values. With
// Instances nil every query finds Value; otherwise a query finds the value of
// the instance its DBInstanceIdentifier dimension names, and a query for
// another instance finds no datapoint. Each datapoint is read Delay after its
// period ended (its Time is now - Delay - the query's Period).
type Metrics struct {
	Value     float64
	Instances map[string]float64
	Delay     time.Duration
}

var _ metric.Reader = Metrics{}

// ReadMetrics answers qs as the type's doc says.
func (m Metrics) ReadMetrics(_ context.Context, qs []metric.Query, now time.Time) ([]metric.Sample, error) {
	out := make([]metric.Sample, len(qs))
	for i, q := range qs {
		v, ok := m.Value, m.Instances == nil
		if !ok {
			v, ok = m.Instances[q.Dimensions["DBInstanceIdentifier"]]
		}
		if ok {
			out[i] = metric.Sample{Value: v, Time: now.Add(-m.Delay - q.Period), Found: true}
		}
	}
	return out, nil
}
