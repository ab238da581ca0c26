package loop

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// Depth metric of a loop whose PARAMS name its SQS queue (depth_queue): the
// queue's own CloudWatch metric, for the dashboard's depth chart.
const (
	DepthNamespace = "AWS/SQS"
	DepthMetric    = "ApproximateNumberOfMessagesVisible"
	DepthDimension = "QueueName"
	// DepthSource is the metric source whose reader reads the depth: the
	// queue's own metric is CloudWatch's.
	DepthSource = "cloudwatch"
)

// DepthQuery returns the CloudWatch query of the depth of queue: the
// largest number of visible messages per minute, looking back lookback.
func DepthQuery(queue string, lookback time.Duration) metric.Query {
	return metric.Query{Source: DepthSource, Namespace: DepthNamespace, Metric: DepthMetric,
		Dimensions: map[string]string{DepthDimension: queue}, Statistic: "Maximum", Period: time.Minute, Lookback: lookback}
}

// readDepths reads the queue depth of every due loop whose PARAMS name a
// queue: one ReadMetrics call on the CloudWatch reader for all of them
// (none when no loop names a queue or there is no CloudWatch reader). A
// depth that cannot be read is left unknown: it is for the operator's eyes,
// the controller does not use it.
func (t *Ticker) readDepths(ctx context.Context, work []*due, now time.Time) {
	reader := t.Metrics[DepthSource]
	var qs []metric.Query
	var ws []*due
	for _, w := range work {
		if w.params.DepthQueue != "" {
			qs = append(qs, DepthQuery(w.params.DepthQueue, max(w.params.StaleAfter, 5*time.Minute)))
			ws = append(ws, w)
		}
	}
	if len(qs) == 0 || reader == nil {
		return
	}
	samples, err := reader.ReadMetrics(ctx, qs, now)
	if err != nil {
		return
	}
	for i, w := range ws {
		if i < len(samples) && samples[i].Err == nil && samples[i].Found {
			w.depth, w.depthKnown = samples[i].Value, true
		}
	}
}
