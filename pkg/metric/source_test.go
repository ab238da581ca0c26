package metric_test

import (
	"testing"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// named is a source with a name and one attribute.
type named struct {
	metric.Source
	name, attr string
}

func (n named) Name() string { return n.name }

func (n named) Attributes() []metric.Attribute {
	return []metric.Attribute{{Name: n.attr, Kind: metric.KindString}}
}

func TestSources(t *testing.T) {
	s := metric.Sources{named{name: "a", attr: "metric_x"}, named{name: "b", attr: "metric_x"}, named{name: "c", attr: "metric_y"}}
	if got := s.Default(); got != "a" {
		t.Errorf("Default() = %q; want a", got)
	}
	if got := s.Names("`"); got != "`a`, `b` or `c`" {
		t.Errorf("Names(`) = %q; want `a`, `b` or `c`", got)
	}
	if got := s[:1].Names(""); got != "a" {
		t.Errorf("Names of one = %q; want a", got)
	}
	if src, ok := s.Lookup("b"); !ok || src.Name() != "b" {
		t.Errorf("Lookup(b) = %v, %v; want b", src, ok)
	}
	if _, ok := s.Lookup("z"); ok {
		t.Error("Lookup(z) found a source; want none")
	}
	attrs := s.Attributes()
	if len(attrs) != 2 || attrs[0].Name != "metric_x" || attrs[1].Name != "metric_y" {
		t.Errorf("Attributes() = %+v; want metric_x then metric_y, each once", attrs)
	}
	if _, ok := s.Attribute("metric_y"); !ok {
		t.Error("Attribute(metric_y) not found")
	}
	if got := (metric.Sources{}).Default(); got != "" {
		t.Errorf("Default of none = %q; want empty", got)
	}
}
