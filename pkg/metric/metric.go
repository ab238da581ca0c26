// Package metric is the port between a loop and where its measurement comes
// from: the Query a loop's PARAMS describe, the Sample a Reader returns for
// it, and the Source through which each metric source (CloudWatch,
// Prometheus, one of yours) declares the PARAMS attributes of its query,
// reads and writes them, validates a query and keys it.
//
// A source is an adapter package with a Source and a Reader; the program
// passes its sources explicitly (a Sources value) to whatever decodes PARAMS
// (pkg/loop), and its readers to the loop's Ticker. docs/architecture.md,
// "Adding a metric source", says what to implement and test; metrictest is
// the contract suite every Reader passes.
package metric

import (
	"context"
	"time"
)

// Query says which measurement a loop controls. Source names the source
// whose rules the other fields follow; each source uses its own fields.
type Query struct {
	// Source names the metric source (its Source.Name).
	Source string `json:"source"`
	// Namespace, Metric, Dimensions and Statistic select a CloudWatch
	// metric.
	Namespace  string            `json:"namespace,omitempty"`
	Metric     string            `json:"metric,omitempty"`
	Dimensions map[string]string `json:"dimensions,omitempty"`
	Statistic  string            `json:"statistic,omitempty"`
	// Period is how long a datapoint aggregates (its timestamp is the
	// start); 0 for an instant value. A datapoint's age counts from the end
	// of its period.
	Period time.Duration `json:"period,omitempty"`
	// PromQL is the expression of a Prometheus query; it must return one
	// series.
	PromQL string `json:"promql,omitempty"`
	// Spec is the query of a source that none of the fields above
	// describes, by attribute name: each such source keeps its own here.
	Spec map[string]string `json:"spec,omitempty"`
	// Lookback is how far back a reader looks for the newest datapoint; the
	// controller sets it from the loop's staleness threshold.
	Lookback time.Duration `json:"-"`
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

// Reader reads the newest datapoint of each query, in one batch: the result
// has one Sample per query, in order. An error means the whole batch
// failed; a failure of one query is reported in its Sample.
type Reader interface {
	ReadMetrics(ctx context.Context, queries []Query, now time.Time) ([]Sample, error)
}
