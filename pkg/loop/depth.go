package loop

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// Depth metrics of a loop whose PARAMS name its SQS queue (depth_queue):
// the queue's own CloudWatch metrics, the depth for the dashboard's depth
// chart and the drain forecast, the oldest message's age for the forecast
// against the queue's retention (depth_retention).
const (
	DepthNamespace = "AWS/SQS"
	DepthMetric    = "ApproximateNumberOfMessagesVisible"
	// OldestAgeMetric is the age of the queue's oldest message, seconds.
	OldestAgeMetric = "ApproximateAgeOfOldestMessage"
	DepthDimension  = "QueueName"
	// DepthSource is the metric source whose reader reads the depth: the
	// queue's own metric is CloudWatch's.
	DepthSource = "cloudwatch"
)

const attrDepthRetention = "depth_retention"

// retentionBounds is SQS's range of MessageRetentionPeriod: 60 s to 14 days.
func retentionBounds() *bounds { return within(60, 14*24*3600) }

// depthRetention: absent is unknown (zero), which the range does not
// refuse; a zero written out is refused, as SQS refuses it.
var depthRetention = codec{
	decode: func(d *decoder, p *Params, name string) {
		p.DepthRetention = d.duration(name, 0)
		if p.DepthRetention == 0 && d.present(name) && !d.failed(name) {
			r := param{kind: kindDuration, bounds: retentionBounds()}.rangeText()
			d.fail(name, "0s must be a duration %s (leave it out when the retention is unknown)", r)
		}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.DepthRetention != 0 {
			a[name] = p.DepthRetention.String()
		}
	},
	value: func(p Params) any {
		if p.DepthRetention == 0 {
			return nil
		}
		return p.DepthRetention
	},
}

// DepthQuery returns the CloudWatch query of the depth of queue: the
// largest number of visible messages per minute, looking back lookback.
func DepthQuery(queue string, lookback time.Duration) metric.Query {
	return sqsQuery(DepthMetric, queue, lookback)
}

// OldestAgeQuery returns the CloudWatch query of the age of queue's oldest
// message: the largest per minute, in seconds, looking back lookback.
func OldestAgeQuery(queue string, lookback time.Duration) metric.Query {
	return sqsQuery(OldestAgeMetric, queue, lookback)
}

func sqsQuery(name, queue string, lookback time.Duration) metric.Query {
	return metric.Query{Source: DepthSource, Namespace: DepthNamespace, Metric: name,
		Dimensions: map[string]string{DepthDimension: queue}, Statistic: "Maximum", Period: time.Minute, Lookback: lookback}
}

// readDepths reads the queue depth and the oldest message's age of every
// due loop whose PARAMS name a queue: one ReadMetrics call on the
// CloudWatch reader for all of them, two queries a loop (none when no loop
// names a queue or there is no CloudWatch reader). A figure that cannot be
// read is left unknown: it is for the operator's eyes, the controller does
// not use it.
func (t *Ticker) readDepths(ctx context.Context, work []*due, now time.Time) {
	reader := t.Metrics[DepthSource]
	var qs []metric.Query
	var ws []*due
	for _, w := range work {
		if q := w.params.DepthQueue; q != "" {
			lookback := max(w.params.StaleAfter, 5*time.Minute)
			qs = append(qs, DepthQuery(q, lookback), OldestAgeQuery(q, lookback))
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
	read := func(i int) (float64, bool) {
		if i < len(samples) && samples[i].Err == nil && samples[i].Found {
			return samples[i].Value, true
		}
		return 0, false
	}
	for i, w := range ws {
		w.depth, w.depthKnown = read(2 * i)
		if age, ok := read(2*i + 1); ok && age >= 0 {
			w.oldestAge, w.ageKnown = time.Duration(age)*time.Second, true
		}
	}
}

// forecast is the oldest message's age (zero when unknown) and, when the
// queue's retention is known too, the time until it expires (zero when it
// is due now).
func (w *due) forecast() (age, expiresIn time.Duration) {
	if !w.ageKnown {
		return 0, 0
	}
	if r := w.params.DepthRetention; r > 0 {
		expiresIn = max(r-w.oldestAge, 0)
	}
	return w.oldestAge, expiresIn
}
