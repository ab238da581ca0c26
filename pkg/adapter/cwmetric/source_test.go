package cwmetric_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/metric"
)

func TestSourceRoundTrip(t *testing.T) {
	src := cwmetric.Source{}
	q := metric.Query{Namespace: "Custom/App", Metric: "Busy", Dimensions: map[string]string{"Service": "a"}, Statistic: "p99", Period: 10 * time.Second}
	back := src.Decode(src.Encode(q, metric.Use{}), metric.Use{})
	if back.Namespace != q.Namespace || back.Metric != q.Metric || !maps.Equal(back.Dimensions, q.Dimensions) || back.Statistic != q.Statistic || back.Period != q.Period {
		t.Errorf("Decode(Encode(%+v)) = %+v; want it back", q, back)
	}
	if errs := src.Validate(q, metric.Use{}); len(errs) != 0 {
		t.Errorf("Validate(%+v) = %v; want none", q, errs)
	}
	if v := src.Encode(metric.Query{}, metric.Use{Nodes: true}); v[cwmetric.AttrDimensions] != nil {
		t.Errorf("Encode with nodes and no dimensions wrote %v; want none", v[cwmetric.AttrDimensions])
	}
}

func TestSourceValidate(t *testing.T) {
	ok := metric.Query{Namespace: "AWS/RDS", Metric: "CPUUtilization", Dimensions: map[string]string{"DBInstanceIdentifier": "db"}, Statistic: "Average", Period: time.Minute}
	many := map[string]string{}
	for i := range 31 {
		many[strings.Repeat("d", i+1)] = "x"
	}
	for _, tt := range []struct {
		name string
		edit func(*metric.Query)
		use  metric.Use
		attr string
	}{
		{"no namespace", func(q *metric.Query) { q.Namespace = "" }, metric.Use{}, cwmetric.AttrNamespace},
		{"no metric", func(q *metric.Query) { q.Metric = "" }, metric.Use{}, cwmetric.AttrMetric},
		{"bad statistic", func(q *metric.Query) { q.Statistic = "Mean" }, metric.Use{}, cwmetric.AttrStatistic},
		{"no dimensions", func(q *metric.Query) { q.Dimensions = nil }, metric.Use{}, cwmetric.AttrDimensions},
		{"31 dimensions", func(q *metric.Query) { q.Dimensions = many }, metric.Use{}, cwmetric.AttrDimensions},
		{"period 90s", func(q *metric.Query) { q.Period = 90 * time.Second }, metric.Use{}, cwmetric.AttrPeriod},
		{"no dimensions with nodes", func(q *metric.Query) { q.Dimensions = nil }, metric.Use{Nodes: true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := ok
			tt.edit(&q)
			errs := cwmetric.Source{}.Validate(q, tt.use)
			if tt.attr == "" {
				if len(errs) != 0 {
					t.Errorf("Validate = %v; want none", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Attr != tt.attr {
				t.Errorf("Validate = %v; want one refusal of %s", errs, tt.attr)
			}
		})
	}
}

func TestValidateStatistic(t *testing.T) {
	for _, s := range []string{"Average", "Sum", "SampleCount", "Minimum", "Maximum", "IQM", "p99", "p99.9", "p0", "p100", "tm90", "wm99", "tc90", "ts50", "TM(10%:90%)", "PR(:300)", "TC(0.005:0.030)", "WM(:95%)"} {
		if err := cwmetric.ValidateStatistic(s); err != nil {
			t.Errorf("ValidateStatistic(%q) = %v; want nil", s, err)
		}
	}
	for _, s := range []string{"", "average", "Avg", "p101", "p-1", "P99", "tm", "TM(10%:90%", "TM(:)", "Average;DROP", "Maximum "} {
		if err := cwmetric.ValidateStatistic(s); err == nil {
			t.Errorf("ValidateStatistic(%q) = nil; want an error", s)
		}
	}
}
