package loop

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Source names where a loop's metric comes from.
type Source string

// Metric sources.
const (
	SourceCloudWatch Source = "cloudwatch"
	SourcePrometheus Source = "prometheus"
)

// Defaults of a CloudWatch metric query: the CPU of an RDS instance.
const (
	DefaultNamespace = "AWS/RDS"
	DefaultMetric    = "CPUUtilization"
	DefaultDimension = "DBInstanceIdentifier"
	DefaultStatistic = "Average"
	DefaultPeriod    = time.Minute
)

// MetricQuery says which measurement a loop controls: a CloudWatch metric
// (namespace, metric, dimensions, statistic, period) or a PromQL expression.
type MetricQuery struct {
	// Source is cloudwatch or prometheus.
	Source Source `json:"source"`
	// Namespace, Metric, Dimensions, Statistic and Period select a CloudWatch
	// metric.
	Namespace  string            `json:"namespace,omitempty"`
	Metric     string            `json:"metric,omitempty"`
	Dimensions map[string]string `json:"dimensions,omitempty"`
	Statistic  string            `json:"statistic,omitempty"`
	Period     time.Duration     `json:"period,omitempty"`
	// PromQL is the expression of a Prometheus query; it must return one
	// series.
	PromQL string `json:"promql,omitempty"`
	// Lookback is how far back a reader looks for the newest datapoint; the
	// controller sets it from the loop's staleness threshold.
	Lookback time.Duration `json:"-"`
}

// Key returns a string that identifies the query, so that loops that measure
// the same metric share one read.
func (q MetricQuery) Key() string {
	var b strings.Builder
	b.WriteString(string(q.Source))
	b.WriteByte('|')
	if q.Source == SourcePrometheus {
		b.WriteString(q.PromQL)
		return b.String()
	}
	b.WriteString(q.Namespace)
	b.WriteByte('|')
	b.WriteString(q.Metric)
	for _, k := range slices.Sorted(maps.Keys(q.Dimensions)) {
		b.WriteByte('|')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(q.Dimensions[k])
	}
	b.WriteByte('|')
	b.WriteString(q.Statistic)
	b.WriteByte('|')
	b.WriteString(q.Period.String())
	b.WriteByte('|')
	b.WriteString(q.Lookback.String())
	return b.String()
}

// Sample is the newest datapoint a reader found for one query.
type Sample struct {
	// Value is the measurement (CPU utilization, percent).
	Value float64
	// Time is the datapoint's timestamp; it decides staleness.
	Time time.Time
	// Found is false when the query returned no datapoint in its lookback.
	Found bool
	// Err is set when this query (not the whole batch) failed.
	Err error
}

// MetricReader reads the newest datapoint of each query, in one batch: the
// result has one Sample per query, in order. An error means the whole batch
// failed; a failure of one query is reported in its Sample.
type MetricReader interface {
	ReadMetrics(ctx context.Context, queries []MetricQuery, now time.Time) ([]Sample, error)
}

// statisticRE matches the statistics CloudWatch's GetMetricData accepts:
// the five basic ones, IQM, percentiles and the trimmed, winsorized and
// percentile-rank shorthands (p99, tm90, p99.9) and their range forms
// (TM(10%:90%), PR(:300)).
var statisticRE = regexp.MustCompile(`^(?:SampleCount|Average|Sum|Minimum|Maximum|IQM` +
	`|(?:p|tm|wm|tc|ts)(?:100|\d{1,2}(?:\.\d{1,10})?)` +
	`|(?:TM|WM|TC|TS|PR)\((?:\d+(?:\.\d+)?%?)?:(?:\d+(?:\.\d+)?%?)?\))$`)

// ValidateStatistic returns an error when s is not a statistic CloudWatch
// accepts. One invalid statistic would fail a whole GetMetricData batch, so
// PARAMS with one are refused.
func ValidateStatistic(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	if !statisticRE.MatchString(s) || strings.HasSuffix(s, "(:)") {
		return fmt.Errorf("%q is not a CloudWatch statistic; want SampleCount, Average, Sum, Minimum, Maximum, a percentile such as p99, or an extended statistic such as tm90 or TM(10%%:90%%)", truncate(s))
	}
	return nil
}
