package cpupub

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// Defaults of the published metric: what RDS publishes.
const (
	DefaultNamespace = "AWS/RDS"
	DefaultMetric    = "CPUUtilization"
	DefaultDimension = "DBInstanceIdentifier"
)

// MetricPutter is the part of the CloudWatch client the publisher uses.
type MetricPutter interface {
	PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error)
}

var _ MetricPutter = (*cloudwatch.Client)(nil)

// CPUReader reads a process's cumulative CPU time and turns two readings
// into a utilization; *Sampler implements it.
type CPUReader interface {
	Sample() (Sample, error)
	Utilization(prev, cur Sample) (float64, error)
}

var _ CPUReader = (*Sampler)(nil)

// Datapoint is one published value: the average utilization over
// [Start, Start+Period).
type Datapoint struct {
	Start  time.Time     `json:"start"`
	Period time.Duration `json:"period"`
	Value  float64       `json:"value"`
}

// Publisher publishes a process's CPU utilization once per period. Periods
// are aligned on multiples of Period since the Unix epoch, as CloudWatch
// aggregates them, so that each datapoint fills one bucket of a
// GetMetricData query with the same period. The period in which the
// publisher starts is partial and is not published.
type Publisher struct {
	CPU CPUReader
	API MetricPutter
	// Instance is the DBInstanceIdentifier dimension's value.
	Instance string
	// Period is the averaging period (RDS: 60 s; 1 s to 60 s here for
	// short runs). Periods under 60 s are published as high-resolution
	// metrics (StorageResolution 1).
	Period time.Duration
	// Delay is how long after its period ends a datapoint is published
	// (RDS: about a minute; default 0).
	Delay time.Duration
	// Namespace and Metric default to AWS/RDS and CPUUtilization.
	Namespace, Metric string
	Clock             consume.Clock
	Log               *slog.Logger
	// OnDatapoint, when set, sees every datapoint as it is published.
	OnDatapoint func(Datapoint)

	prev    Sample
	hasPrev bool
	pending []Datapoint
}

func (p *Publisher) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

// Validate reports whether p can run.
func (p *Publisher) Validate() error {
	switch {
	case p.CPU == nil || p.API == nil || p.Clock == nil:
		return fmt.Errorf("cpu publisher: CPU, API and Clock must be set")
	case p.Instance == "":
		return fmt.Errorf("cpu publisher: the DBInstanceIdentifier is empty")
	case p.Period < time.Second || p.Period%time.Second != 0:
		return fmt.Errorf("cpu publisher: period %v: want whole seconds, at least 1s", p.Period)
	case p.Delay < 0:
		return fmt.Errorf("cpu publisher: delay %v is negative", p.Delay)
	}
	return nil
}

// Run publishes until ctx ends. A failed read or publication is logged and
// the datapoint skipped or retried at the next wake-up; Run returns only
// when ctx ends (nil) or the configuration is invalid.
func (p *Publisher) Run(ctx context.Context) error {
	if err := p.Validate(); err != nil {
		return err
	}
	for {
		now := p.Clock.Now()
		next := now.Truncate(p.Period).Add(p.Period)
		if len(p.pending) > 0 {
			if due := p.pending[0].Start.Add(p.Period + p.Delay); due.Before(next) {
				next = due
			}
		}
		if err := p.Clock.Sleep(ctx, next.Sub(now)); err != nil {
			return nil
		}
		p.Step(ctx)
	}
}

// Step samples the process when a period has ended, and publishes every
// datapoint that is due. Run calls it at every period boundary and due time.
func (p *Publisher) Step(ctx context.Context) {
	now := p.Clock.Now()
	boundary := now.Truncate(p.Period)
	if !p.hasPrev || boundary.After(p.prev.At.Truncate(p.Period)) {
		cur, err := p.CPU.Sample()
		if err != nil {
			p.log().WarnContext(ctx, "cpu sample failed", "err", err)
			p.hasPrev = false
		} else {
			cur.At = now
			if p.hasPrev {
				start := boundary.Add(-p.Period)
				// One full period between the samples (a late wake-up
				// stretches it; a skipped period is not invented).
				if p.prev.At.Truncate(p.Period).Equal(start) {
					if v, err := p.CPU.Utilization(p.prev, cur); err != nil {
						p.log().WarnContext(ctx, "cpu utilization", "err", err)
					} else {
						p.pending = append(p.pending, Datapoint{Start: start, Period: p.Period, Value: v})
					}
				}
			}
			p.prev, p.hasPrev = cur, true
		}
	}
	for len(p.pending) > 0 {
		d := p.pending[0]
		if now.Before(d.Start.Add(d.Period + p.Delay)) {
			break
		}
		if err := p.publish(ctx, d); err != nil {
			p.log().WarnContext(ctx, "publish cpu datapoint", "start", d.Start, "err", err)
			if now.Sub(d.Start) > 10*p.Period {
				p.pending = p.pending[1:] // give up on a datapoint too old to matter
			}
			break
		}
		p.pending = p.pending[1:]
		if p.OnDatapoint != nil {
			p.OnDatapoint(d)
		}
	}
}

func (p *Publisher) publish(ctx context.Context, d Datapoint) error {
	ns, metric := p.Namespace, p.Metric
	if ns == "" {
		ns = DefaultNamespace
	}
	if metric == "" {
		metric = DefaultMetric
	}
	datum := types.MetricDatum{
		MetricName: aws.String(metric),
		Dimensions: []types.Dimension{{Name: aws.String(DefaultDimension), Value: aws.String(p.Instance)}},
		Timestamp:  aws.Time(d.Start),
		Value:      aws.Float64(d.Value),
		Unit:       types.StandardUnitPercent,
	}
	if d.Period < time.Minute {
		datum.StorageResolution = aws.Int32(1)
	}
	_, err := p.API.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(ns), MetricData: []types.MetricDatum{datum}})
	if err != nil {
		return fmt.Errorf("PutMetricData %s/%s %s=%s: %w", ns, metric, DefaultDimension, p.Instance, err)
	}
	p.log().InfoContext(ctx, "cpu datapoint", "instance", p.Instance, "start", d.Start, "period", d.Period, "value", d.Value)
	return nil
}
