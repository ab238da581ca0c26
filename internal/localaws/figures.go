package localaws

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// Figures publishes what AWS publishes for an SQS Lambda consumer and its
// queue, from the batches of the stand-in mapping (Poller.OnBatch): the
// function's AWS/Lambda Duration (one value per invocation, milliseconds)
// and Invocations, and the queue's AWS/SQS NumberOfMessagesDeleted, every
// Every (0 deletions too, as SQS publishes for an active queue). A
// controller that sizes the mapping of a consumer without Sluice code reads
// them (loop.FunctionQueries).
type Figures struct {
	API      cpupub.MetricPutter
	Function string
	Queue    string
	// Every is how often the figures are put (default 5s).
	Every time.Duration
	Log   *slog.Logger

	mu        sync.Mutex
	durations []float64
	deleted   int
}

// QueueName is the name of the queue at url (its last path element).
func QueueName(url string) string { return path.Base(url) }

// Record adds a batch's outcome: an invocation, its duration, the messages
// deleted after it.
func (f *Figures) Record(b BatchResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.durations = append(f.durations, float64(b.Took)/float64(time.Millisecond))
	f.deleted += b.Deleted
}

// Run puts the figures every Every until ctx ends, and once more then.
func (f *Figures) Run(ctx context.Context) {
	t := time.NewTicker(defaults.Positive(f.Every, 5*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.put(context.WithoutCancel(ctx), time.Now())
			return
		case now := <-t.C:
			if err := f.put(ctx, now); err != nil && f.Log != nil {
				f.Log.WarnContext(ctx, "put the consumer's figures", "err", err)
			}
		}
	}
}

// put sends what was recorded since the last put, timestamped at.
func (f *Figures) put(ctx context.Context, at time.Time) error {
	f.mu.Lock()
	durations, deleted := f.durations, f.deleted
	f.durations, f.deleted = nil, 0
	f.mu.Unlock()
	if len(durations) > 0 {
		dims := []types.Dimension{{Name: aws.String(loop.FunctionDimension), Value: aws.String(f.Function)}}
		_, err := f.API.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(loop.LambdaNamespace), MetricData: []types.MetricDatum{
			{MetricName: aws.String(loop.DurationMetric), Dimensions: dims, Timestamp: aws.Time(at), Values: durations, Unit: types.StandardUnitMilliseconds},
			{MetricName: aws.String(loop.InvocationsMetric), Dimensions: dims, Timestamp: aws.Time(at), Value: aws.Float64(float64(len(durations))), Unit: types.StandardUnitCount},
		}})
		if err != nil {
			return fmt.Errorf("PutMetricData %s %s: %w", loop.LambdaNamespace, f.Function, err)
		}
	}
	_, err := f.API.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String(loop.DepthNamespace), MetricData: []types.MetricDatum{
		{MetricName: aws.String(loop.DeletedMetric), Dimensions: []types.Dimension{{Name: aws.String(loop.DepthDimension), Value: aws.String(f.Queue)}},
			Timestamp: aws.Time(at), Value: aws.Float64(float64(deleted)), Unit: types.StandardUnitCount},
	}})
	if err != nil {
		return fmt.Errorf("PutMetricData %s %s: %w", loop.DepthNamespace, f.Queue, err)
	}
	return nil
}
