package cwmetric_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/metric/metrictest"
)

func TestReadMetricsMoto(t *testing.T) {
	ep := testenv.AWSEndpoint(t)
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := cwmetric.NewClient(cfg, ep)
	now := time.Now().UTC().Truncate(time.Second)
	db := fmt.Sprintf("db-%d", now.UnixNano())
	other := db + "-other"

	// Three datapoints for db (the newest 2 minutes ago), one for other in a
	// custom namespace with two dimensions.
	put := func(ns, name string, dims map[string]string, at time.Time, v float64) {
		t.Helper()
		// Sorted, as the reader sends them: moto_server matches dimensions
		// in order (CloudWatch does not).
		var d []types.Dimension
		for _, k := range slices.Sorted(maps.Keys(dims)) {
			d = append(d, types.Dimension{Name: aws.String(k), Value: aws.String(dims[k])})
		}
		_, err := client.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{
			Namespace: aws.String(ns),
			MetricData: []types.MetricDatum{{
				MetricName: aws.String(name), Dimensions: d, Timestamp: aws.Time(at), Value: aws.Float64(v),
				Unit: types.StandardUnitPercent,
			}},
		})
		if err != nil {
			t.Fatalf("PutMetricData: %v", err)
		}
	}
	rdsDims := map[string]string{"DBInstanceIdentifier": db}
	put("AWS/RDS", "CPUUtilization", rdsDims, now.Add(-6*time.Minute), 40)
	put("AWS/RDS", "CPUUtilization", rdsDims, now.Add(-4*time.Minute), 50)
	put("AWS/RDS", "CPUUtilization", rdsDims, now.Add(-2*time.Minute), 65)
	put("Custom/App", "Busy", map[string]string{"Service": other, "Zone": "a"}, now.Add(-3*time.Minute), 12.5)

	queries := []metric.Query{
		{Source: cwmetric.Name, Dimensions: rdsDims},
		{Source: cwmetric.Name, Namespace: "Custom/App", Metric: "Busy", Statistic: "Maximum",
			Dimensions: map[string]string{"Service": other, "Zone": "a"}, Period: time.Minute},
		{Source: cwmetric.Name, Dimensions: map[string]string{"DBInstanceIdentifier": db + "-missing"}},
		{Source: prommetric.Name, PromQL: "up"},
	}
	got, err := cwmetric.New(client).ReadMetrics(ctx, queries, now)
	if err != nil {
		t.Fatalf("ReadMetrics: %v", err)
	}
	if len(got) != len(queries) {
		t.Fatalf("ReadMetrics returned %d samples; want %d", len(got), len(queries))
	}
	tests := []struct {
		name  string
		found bool
		value float64
		at    time.Time
	}{
		{"rds default", true, 65, now.Add(-2 * time.Minute)},
		{"custom namespace", true, 12.5, now.Add(-3 * time.Minute)},
		{"missing", false, 0, time.Time{}},
	}
	for i, tt := range tests {
		s := got[i]
		if s.Err != nil || s.Found != tt.found || s.Value != tt.value || !s.Time.Equal(tt.at) {
			t.Errorf("%s: sample = %+v; want found=%v value=%v time=%v", tt.name, s, tt.found, tt.value, tt.at)
		}
	}
	if got[3].Err == nil {
		t.Errorf("prometheus query through the CloudWatch reader: Err = nil; want an error")
	}
	metrictest.Run(t, cwmetric.New(client), metrictest.Fixture{
		Present: queries[0], Value: 65, Missing: queries[2], Foreign: queries[3], Now: now,
	})
}

// fakeAPI records GetMetricData calls and answers each query with one
// datapoint whose value is the query's index, splitting answers over pages of
// pageSize results.
type fakeAPI struct {
	pageSize int
	calls    []*cloudwatch.GetMetricDataInput
}

func (f *fakeAPI) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	cp := *in
	f.calls = append(f.calls, &cp)
	start := 0
	if in.NextToken != nil {
		fmt.Sscan(*in.NextToken, &start)
	}
	end := min(start+f.pageSize, len(in.MetricDataQueries))
	out := &cloudwatch.GetMetricDataOutput{}
	for _, q := range in.MetricDataQueries[start:end] {
		var v float64
		fmt.Sscan(aws.ToString(q.MetricStat.Metric.Dimensions[0].Value), &v)
		out.MetricDataResults = append(out.MetricDataResults, types.MetricDataResult{
			Id: q.Id, Timestamps: []time.Time{in.EndTime.Add(-time.Minute)}, Values: []float64{v},
		})
	}
	if end < len(in.MetricDataQueries) {
		out.NextToken = aws.String(fmt.Sprint(end))
	}
	return out, nil
}

func TestReadMetricsBatches(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	tests := []struct {
		queries, pageSize, wantCalls int
	}{
		{1, 500, 1},
		{100, 500, 1},
		{500, 500, 1},
		{501, 500, 2},
		{1000, 500, 2},
		{1000, 200, 6}, // two batches of 500, each in three pages
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d queries, pages of %d", tt.queries, tt.pageSize), func(t *testing.T) {
			qs := make([]metric.Query, tt.queries)
			for i := range qs {
				qs[i] = metric.Query{Source: cwmetric.Name, Dimensions: map[string]string{"DBInstanceIdentifier": fmt.Sprint(i)}}
			}
			api := &fakeAPI{pageSize: tt.pageSize}
			got, err := cwmetric.New(api).ReadMetrics(context.Background(), qs, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(api.calls) != tt.wantCalls {
				t.Errorf("GetMetricData calls = %d; want %d", len(api.calls), tt.wantCalls)
			}
			for _, c := range api.calls {
				if n := len(c.MetricDataQueries); n > cwmetric.MaxQueriesPerCall {
					t.Errorf("call with %d queries; want at most %d", n, cwmetric.MaxQueriesPerCall)
				}
			}
			for i, s := range got {
				if !s.Found || s.Value != float64(i) || !s.Time.Equal(now.Add(-time.Minute)) {
					t.Fatalf("sample %d = %+v; want value %d at %v", i, s, i, now.Add(-time.Minute))
				}
			}
		})
	}
}

// pickyAPI refuses any request with a query whose statistic is "Bogus", as
// CloudWatch does, and answers the others with one datapoint each.
type pickyAPI struct{ calls int }

func (p *pickyAPI) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	p.calls++
	out := &cloudwatch.GetMetricDataOutput{}
	for _, q := range in.MetricDataQueries {
		if aws.ToString(q.MetricStat.Stat) == "Bogus" {
			return nil, &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "The value Bogus for parameter MetricDataQueries.member.1.MetricStat.Stat is not valid."}
		}
		out.MetricDataResults = append(out.MetricDataResults, types.MetricDataResult{Id: q.Id, Timestamps: []time.Time{in.EndTime.Add(-2 * time.Minute)}, Values: []float64{42}})
	}
	return out, nil
}

// TestReadMetricsIsolatesAnInvalidQuery: one query CloudWatch refuses fails
// alone; the other queries of its batch are read.
func TestReadMetricsIsolatesAnInvalidQuery(t *testing.T) {
	var qs []metric.Query
	for i := range 9 {
		q := metric.Query{Source: cwmetric.Name, Dimensions: map[string]string{"DBInstanceIdentifier": fmt.Sprint("db", i)}}
		if i == 6 {
			q.Statistic = "Bogus"
		}
		qs = append(qs, q)
	}
	api := &pickyAPI{}
	got, err := cwmetric.New(api).ReadMetrics(context.Background(), qs, time.Now())
	if err != nil {
		t.Fatalf("ReadMetrics = %v; want the failure in the bad query's sample", err)
	}
	for i, s := range got {
		if i == 6 {
			if s.Err == nil || s.Found {
				t.Errorf("sample %d (Bogus) = %+v; want its error", i, s)
			}
			continue
		}
		if s.Err != nil || !s.Found || s.Value != 42 {
			t.Errorf("sample %d = %+v; want 42 found", i, s)
		}
	}
	if api.calls > 1+2*4 {
		t.Errorf("GetMetricData calls = %d; want at most %d", api.calls, 1+2*4)
	}
}

// A loop's queue figures, the depth and the oldest message's age, are two
// AWS/SQS queries of one batch, each read back as its own metric.
func TestReadMetricsQueueDepthAndAgeMoto(t *testing.T) {
	ep := testenv.AWSEndpoint(t)
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := cwmetric.NewClient(cfg, ep)
	now := time.Now().UTC().Truncate(time.Second)
	queue := fmt.Sprintf("q-%d", now.UnixNano())
	for name, v := range map[string]float64{loop.DepthMetric: 1.2e6, loop.OldestAgeMetric: 79200} {
		_, err := client.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{
			Namespace: aws.String(loop.DepthNamespace),
			MetricData: []types.MetricDatum{{MetricName: aws.String(name), Timestamp: aws.Time(now.Add(-2 * time.Minute)), Value: aws.Float64(v),
				Dimensions: []types.Dimension{{Name: aws.String(loop.DepthDimension), Value: aws.String(queue)}}}},
		})
		if err != nil {
			t.Fatalf("PutMetricData: %v", err)
		}
	}
	got, err := cwmetric.New(client).ReadMetrics(ctx, []metric.Query{
		loop.DepthQuery(queue, 5*time.Minute), loop.OldestAgeQuery(queue, 5*time.Minute),
	}, now)
	if err != nil {
		t.Fatalf("ReadMetrics: %v", err)
	}
	for i, want := range []float64{1.2e6, 79200} {
		if s := got[i]; s.Err != nil || !s.Found || s.Value != want {
			t.Errorf("query %d: sample %+v; want %v", i, s, want)
		}
	}
}
