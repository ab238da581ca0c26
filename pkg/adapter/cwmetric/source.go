package cwmetric

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// Name is the source's name, the value of PARAMS metric_source.
const Name = "cloudwatch"

// Attribute names of a CloudWatch query in PARAMS.
const (
	AttrNamespace  = "metric_namespace"
	AttrMetric     = "metric_name"
	AttrDimensions = "metric_dimensions"
	AttrStatistic  = "metric_statistic"
	AttrPeriod     = "metric_period"
)

// Defaults of a CloudWatch metric query: the CPU of an RDS instance.
const (
	DefaultNamespace = "AWS/RDS"
	DefaultMetric    = "CPUUtilization"
	DefaultDimension = "DBInstanceIdentifier"
	DefaultStatistic = "Average"
	DefaultPeriod    = time.Minute
)

// MaxDimensions is the most dimensions CloudWatch allows a metric.
const MaxDimensions = 30

// Source is CloudWatch's rules for a loop's metric: namespace, metric,
// dimensions (at most 30), statistic and period.
type Source struct{}

var _ metric.Source = Source{}

// Name returns "cloudwatch".
func (Source) Name() string { return Name }

// Attributes declares the CloudWatch query's attributes.
func (Source) Attributes() []metric.Attribute {
	return []metric.Attribute{
		{Name: AttrNamespace, Kind: metric.KindString, Default: DefaultNamespace, DefaultDoc: "`AWS/RDS`", Doc: "CloudWatch namespace"},
		{Name: AttrMetric, Kind: metric.KindString, Default: DefaultMetric, DefaultDoc: "`CPUUtilization`", Doc: "CloudWatch metric"},
		{Name: AttrDimensions, Kind: metric.KindStringMap, DefaultDoc: "required for CloudWatch", Doc: "CloudWatch dimensions, e.g. `{\"DBInstanceIdentifier\": {\"S\": \"orders-db\"}}` (at most 30; optional with `nodes`)"},
		{Name: AttrStatistic, Kind: metric.KindString, Default: DefaultStatistic, DefaultDoc: "`Average`", Doc: "any CloudWatch statistic (`Maximum`, `p99`, ...)"},
		{Name: AttrPeriod, Kind: metric.KindDuration, Default: DefaultPeriod, DefaultDoc: "`1m`", Doc: "CloudWatch period: 1s, 5s, 10s, 30s or a multiple of 60s"},
	}
}

// Decode makes a CloudWatch query from its attributes.
func (Source) Decode(v metric.Values, _ metric.Use) metric.Query {
	return metric.Query{
		Namespace:  v.String(AttrNamespace),
		Metric:     v.String(AttrMetric),
		Dimensions: v.StringMap(AttrDimensions),
		Statistic:  v.String(AttrStatistic),
		Period:     v.Duration(AttrPeriod),
	}
}

// Encode returns q's attributes; a loop with nodes and no dimensions of its
// own has none written.
func (Source) Encode(q metric.Query, u metric.Use) metric.Values {
	v := metric.Values{
		AttrNamespace: q.Namespace,
		AttrMetric:    q.Metric,
		AttrStatistic: q.Statistic,
		AttrPeriod:    q.Period,
	}
	if q.Dimensions != nil || !u.Nodes {
		v[AttrDimensions] = maps.Clone(q.Dimensions)
		if q.Dimensions == nil {
			v[AttrDimensions] = map[string]string{}
		}
	}
	return v
}

// Validate checks a CloudWatch query: a namespace, a metric, a statistic
// CloudWatch accepts, 1 to 30 dimensions (none needed with nodes, each
// naming its own) and a period CloudWatch stores.
func (Source) Validate(q metric.Query, u metric.Use) []metric.FieldError {
	var errs []metric.FieldError
	fail := func(attr, format string, args ...any) {
		errs = append(errs, metric.FieldError{Attr: attr, Reason: fmt.Sprintf(format, args...)})
	}
	if q.Namespace == "" {
		fail(AttrNamespace, "empty; want a CloudWatch namespace such as %s", DefaultNamespace)
	}
	if q.Metric == "" {
		fail(AttrMetric, "empty; want a CloudWatch metric name such as %s", DefaultMetric)
	}
	if err := ValidateStatistic(q.Statistic); err != nil {
		fail(AttrStatistic, "%v", err)
	}
	if len(q.Dimensions) == 0 && !u.Nodes {
		fail(AttrDimensions, "missing; a CloudWatch metric needs its dimensions, e.g. {\"DBInstanceIdentifier\": \"mydb\"}")
	}
	if len(q.Dimensions) > MaxDimensions {
		fail(AttrDimensions, "%d dimensions; CloudWatch allows %d", len(q.Dimensions), MaxDimensions)
	}
	if !ValidPeriod(q.Period) {
		fail(AttrPeriod, "%v: CloudWatch periods are 1s, 5s, 10s, 30s or a multiple of 60s", q.Period)
	}
	return errs
}

// ValidPeriod reports whether CloudWatch stores datapoints of period p:
// 1s, 5s, 10s, 30s (high resolution) or a multiple of 60s.
func ValidPeriod(p time.Duration) bool {
	if p <= 0 || p%time.Second != 0 {
		return false
	}
	return p%time.Minute == 0 || slices.Contains([]time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}, p)
}

// Node returns the query of a node: the loop's dimensions with the node's
// merged over them. The node's text is `Name=value[,Name2=value2]`, or a
// bare value for the loop's single dimension (DBInstanceIdentifier when the
// loop has none).
func (Source) Node(q metric.Query, text string) (metric.Query, error) {
	dims, err := nodeDimensions(q.Dimensions, text)
	if err != nil {
		return q, err
	}
	q.Dimensions = dims
	return q, nil
}

// nodeDimensions merges a node's dimension text over the loop's dimensions.
func nodeDimensions(loopDims map[string]string, text string) (map[string]string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("empty; want the node's dimensions, e.g. %s=replica-1", DefaultDimension)
	}
	out := maps.Clone(loopDims)
	if out == nil {
		out = make(map[string]string, 1)
	}
	if !strings.Contains(text, "=") {
		switch len(loopDims) {
		case 0:
			out[DefaultDimension] = text
		case 1:
			for k := range loopDims {
				out[k] = text
			}
		default:
			return nil, fmt.Errorf("%q is a bare value but metric_dimensions has %d dimensions: name it, e.g. Name=value", truncate(text), len(loopDims))
		}
		return out, nil
	}
	for _, pair := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: want Name=value[,Name2=value2]", truncate(text))
		}
		out[k] = v
	}
	return out, nil
}

// Key identifies a CloudWatch query by every field the read depends on.
func (Source) Key(q metric.Query) string {
	var b strings.Builder
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
		return fmt.Errorf("empty; want a CloudWatch statistic such as %s, Maximum or p99", DefaultStatistic)
	}
	if !statisticRE.MatchString(s) || strings.HasSuffix(s, "(:)") {
		return fmt.Errorf("%q is not a CloudWatch statistic; want SampleCount, Average, Sum, Minimum, Maximum, a percentile such as p99, or an extended statistic such as tm90 or TM(10%%:90%%)", truncate(s))
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
