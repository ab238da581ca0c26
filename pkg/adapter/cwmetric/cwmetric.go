// Package cwmetric reads the metrics of many loops from Amazon CloudWatch
// with batched GetMetricData calls (up to 500 queries a call, paginated) and
// returns, for each query, the newest datapoint and its timestamp, which
// decides staleness.
package cwmetric

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/schemas"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// MaxQueriesPerCall is GetMetricData's limit on queries in one request.
const MaxQueriesPerCall = 500

// defaultLookback is how far back a query looks when it sets no Lookback.
const defaultLookback = 15 * time.Minute

// API is the part of the CloudWatch client the reader uses.
type API interface {
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

var _ API = (*cloudwatch.Client)(nil)

// NewClient returns a CloudWatch client for cfg. When endpoint is not empty
// (a local emulator such as moto_server or LocalStack), the client speaks the
// AWS JSON 1.0 protocol instead of the SDK's default CBOR, which emulators do
// not speak, and sends request bodies uncompressed.
func NewClient(cfg aws.Config, endpoint string) *cloudwatch.Client {
	return cloudwatch.NewFromConfig(cfg, func(o *cloudwatch.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.Protocol = awsjson.New10(schemas.GraniteServiceVersion20100801)
			// The SDK gzips large PutMetricData bodies; with the JSON
			// protocol moto_server fails to read them.
			o.DisableRequestCompression = true
		}
	})
}

// Reader reads CloudWatch metrics in batches.
type Reader struct {
	api API
}

var _ metric.Reader = (*Reader)(nil)

// New returns a reader that calls api.
func New(api API) *Reader { return &Reader{api: api} }

// ReadMetrics returns the newest datapoint of each query within its
// lookback. Queries whose source is not cloudwatch get a Sample with Err set.
// It makes ceil(len(queries)/500) GetMetricData calls, plus one for each
// further page.
func (r *Reader) ReadMetrics(ctx context.Context, queries []metric.Query, now time.Time) ([]metric.Sample, error) {
	samples := make([]metric.Sample, len(queries))
	var idx []int // indexes of the cloudwatch queries
	for i, q := range queries {
		if q.Source != Name && q.Source != "" {
			samples[i].Err = fmt.Errorf("cloudwatch reader: query source %q is not cloudwatch", q.Source)
			continue
		}
		idx = append(idx, i)
	}
	for start := 0; start < len(idx); start += MaxQueriesPerCall {
		batch := idx[start:min(start+MaxQueriesPerCall, len(idx))]
		if err := r.readIsolated(ctx, queries, batch, samples, now); err != nil {
			return nil, err
		}
	}
	return samples, nil
}

// readIsolated reads a batch; when CloudWatch refuses it for a query's
// fault (an invalid parameter), it reads each half on its own, so that
// the bad queries end with their own Err and the others are read: about
// 2·log2(n) more calls per bad query. Other errors (throttling, network)
// fail the batch.
func (r *Reader) readIsolated(ctx context.Context, queries []metric.Query, batch []int, samples []metric.Sample, now time.Time) error {
	err := r.readBatch(ctx, queries, batch, samples, now)
	if err == nil || !isQueryFault(err) {
		return err
	}
	if len(batch) == 1 {
		samples[batch[0]] = metric.Sample{Err: err}
		return nil
	}
	half := len(batch) / 2
	if err := r.readIsolated(ctx, queries, batch[:half], samples, now); err != nil {
		return err
	}
	return r.readIsolated(ctx, queries, batch[half:], samples, now)
}

// isQueryFault reports whether err is CloudWatch refusing the request's
// content rather than failing to serve it.
func isQueryFault(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "InvalidParameterValue", "InvalidParameterCombination", "MissingParameter", "ValidationError":
		return true
	}
	return false
}

func (r *Reader) readBatch(ctx context.Context, queries []metric.Query, batch []int, samples []metric.Sample, now time.Time) error {
	var lookback time.Duration
	mdq := make([]types.MetricDataQuery, len(batch))
	byID := make(map[string]int, len(batch))
	for j, i := range batch {
		q := withDefaults(queries[i])
		lookback = max(lookback, q.Lookback+q.Period)
		id := fmt.Sprintf("q%d", j)
		byID[id] = i
		dims := make([]types.Dimension, 0, len(q.Dimensions))
		for _, k := range slices.Sorted(maps.Keys(q.Dimensions)) {
			dims = append(dims, types.Dimension{Name: aws.String(k), Value: aws.String(q.Dimensions[k])})
		}
		mdq[j] = types.MetricDataQuery{
			Id: aws.String(id),
			MetricStat: &types.MetricStat{
				Metric: &types.Metric{
					Namespace:  aws.String(q.Namespace),
					MetricName: aws.String(q.Metric),
					Dimensions: dims,
				},
				Period: aws.Int32(int32(q.Period / time.Second)),
				Stat:   aws.String(q.Statistic),
			},
			ReturnData: aws.Bool(true),
		}
	}
	in := &cloudwatch.GetMetricDataInput{
		MetricDataQueries: mdq,
		StartTime:         aws.Time(now.Add(-lookback)),
		EndTime:           aws.Time(now),
		ScanBy:            types.ScanByTimestampDescending,
	}
	for pages := cloudwatch.NewGetMetricDataPaginator(r.api, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("cloudwatch GetMetricData (%d queries): %w", len(batch), err)
		}
		for _, res := range out.MetricDataResults {
			i, ok := byID[aws.ToString(res.Id)]
			if !ok {
				continue
			}
			s := &samples[i]
			for k, ts := range res.Timestamps {
				if k >= len(res.Values) {
					break
				}
				if !s.Found || ts.After(s.Time) {
					s.Value, s.Time, s.Found = res.Values[k], ts, true
				}
			}
		}
	}
	return nil
}

// withDefaults fills the query's empty fields with the defaults: AWS/RDS
// CPUUtilization, Average over 60 s.
func withDefaults(q metric.Query) metric.Query {
	if q.Namespace == "" {
		q.Namespace = DefaultNamespace
	}
	if q.Metric == "" {
		q.Metric = DefaultMetric
	}
	if q.Statistic == "" {
		q.Statistic = DefaultStatistic
	}
	q.Period = defaults.Positive(q.Period, DefaultPeriod)
	q.Lookback = defaults.Positive(q.Lookback, defaultLookback)
	return q
}
