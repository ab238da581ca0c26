package prommetric

import (
	"errors"
	"strings"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// Name is the source's name, the value of PARAMS metric_source.
const Name = "prometheus"

// AttrPromQL is the PARAMS attribute of a Prometheus query.
const AttrPromQL = "metric_promql"

// Source is Prometheus's rules for a loop's metric: one PromQL expression
// that returns one series.
type Source struct{}

var _ metric.Source = Source{}

// Name returns "prometheus".
func (Source) Name() string { return Name }

// Attributes declares metric_promql.
func (Source) Attributes() []metric.Attribute {
	return []metric.Attribute{
		{Name: AttrPromQL, Kind: metric.KindString, DefaultDoc: "required for Prometheus", Doc: "a PromQL expression returning one series (aggregate with `max(...)`; optional with `nodes`); the controller needs `SLUICE_PROMETHEUS_URL`"},
	}
}

// Decode makes a Prometheus query from metric_promql.
func (Source) Decode(v metric.Values, _ metric.Use) metric.Query {
	return metric.Query{PromQL: v.String(AttrPromQL)}
}

// Encode returns metric_promql.
func (Source) Encode(q metric.Query, _ metric.Use) metric.Values {
	return metric.Values{AttrPromQL: q.PromQL}
}

// Validate requires an expression, unless the loop has nodes, each with
// its own. Whether it parses and returns one series only Prometheus says:
// the reader reports that in the query's Sample.
func (Source) Validate(q metric.Query, u metric.Use) []metric.FieldError {
	if strings.TrimSpace(q.PromQL) == "" && !u.Nodes {
		return []metric.FieldError{{Attr: AttrPromQL, Reason: "missing; a prometheus metric needs a PromQL expression (or nodes, each with its own)"}}
	}
	return nil
}

// Node returns the node's query: its own PromQL expression.
func (Source) Node(q metric.Query, text string) (metric.Query, error) {
	if strings.TrimSpace(text) == "" {
		return q, errors.New("empty; want the node's PromQL expression")
	}
	q.PromQL = text
	return q, nil
}

// Key identifies a query by its expression: the reader evaluates it at the
// tick's time whatever the lookback.
func (Source) Key(q metric.Query) string { return q.PromQL }
