package loop

import (
	"maps"
	"time"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// A loop's metric query is its source's: PARAMS metric_source names one of
// the sources the decoder is given (the first one when absent), and that
// source declares, reads, writes and validates the other metric_*
// attributes (metric.Source). The attributes every given source declares
// are known to the item, whichever source it names; only the named
// source's are read.

// decodeMetric reads metric_source and the named source's query
// attributes into p.Metric. Every source's attributes present in the item
// are type-checked.
func (d *decoder) decodeMetric(p *Params, _ string) {
	name := d.str(attrMetricSource, d.sources.Default())
	p.Metric = metric.Query{Source: name}
	src, ok := d.sources.Lookup(name)
	own := map[string]metric.Attribute{}
	if ok {
		for _, a := range src.Attributes() {
			own[a.Name] = a
		}
	}
	v := metric.Values{}
	for _, a := range d.sources.Attributes() {
		if o, mine := own[a.Name]; mine {
			a = o
		}
		x, set := d.metricValue(a)
		if _, mine := own[a.Name]; mine && set {
			v[a.Name] = x
		}
	}
	if ok {
		p.Metric = src.Decode(v, metric.Use{Nodes: d.present(attrNodes)})
		p.Metric.Source = name
	}
}

// metricValue reads a query attribute as its kind says; set is false when
// it is absent without a default.
func (d *decoder) metricValue(a metric.Attribute) (v any, set bool) {
	set = d.present(a.Name) || a.Default != nil
	switch a.Kind {
	case metric.KindDuration:
		def, _ := a.Default.(time.Duration)
		return d.duration(a.Name, def), set
	case metric.KindStringMap:
		m := d.stringMap(a.Name)
		return m, m != nil
	case metric.KindNumber:
		def, _ := a.Default.(float64)
		return d.number(a.Name, def), set
	default:
		def, _ := a.Default.(string)
		return d.str(a.Name, def), set
	}
}

// encodeMetric writes q's metric_source and its source's attributes into a.
func encodeMetric(sources metric.Sources, q metric.Query, nodes bool, a map[string]any) {
	a[attrMetricSource] = q.Source
	src, ok := sources.Lookup(q.Source)
	if !ok {
		return
	}
	for name, v := range src.Encode(q, metric.Use{Nodes: nodes}) {
		switch x := v.(type) {
		case time.Duration:
			a[name] = x.String()
		case map[string]string:
			m := make(map[string]any, len(x))
			for k, s := range x {
				m[k] = s
			}
			a[name] = m
		default:
			a[name] = v
		}
	}
}

// checkMetric checks the metric query by its source's rules.
func (p Params) checkMetric(sources metric.Sources, fail failFunc) {
	src, ok := sources.Lookup(p.Metric.Source)
	if !ok {
		fail(attrMetricSource, "unknown source %q; want %s", truncate(p.Metric.Source), sources.Names(""))
		return
	}
	for _, e := range src.Validate(p.Metric, metric.Use{Nodes: len(p.Nodes) > 0}) {
		fail(e.Attr, "%s", e.Reason)
	}
}

// NodeQuery returns the metric query of node n: the loop's query with the
// node's metric text applied by the loop's source (a CloudWatch node's
// dimensions, a Prometheus node's PromQL).
func (p Params) NodeQuery(sources metric.Sources, n Node) metric.Query {
	src, ok := sources.Lookup(p.Metric.Source)
	if !ok {
		return p.Metric
	}
	q, _ := src.Node(p.Metric, n.Metric)
	return q
}

// checkNodeMetric checks node n's metric text by the loop's source.
func (p Params) checkNodeMetric(sources metric.Sources, n Node, fail failFunc) {
	if src, ok := sources.Lookup(p.Metric.Source); ok {
		if _, err := src.Node(p.Metric, n.Metric); err != nil {
			fail(attrNodes+"."+n.Name+".metric", "%v", err)
		}
	}
}

// metricKind is the kind of PARAMS attribute a query attribute is.
func metricKind(k metric.Kind) kind {
	switch k {
	case metric.KindDuration:
		return kindDuration
	case metric.KindStringMap:
		return kindStringMap
	case metric.KindNumber:
		return kindNumber
	default:
		return kindString
	}
}

// paramsFor returns paramTable as the docs and lookups see it with sources:
// metric_source's default and meaning name them, and each source's query
// attributes follow it.
func paramsFor(sources metric.Sources) []param {
	out := make([]param, 0, len(paramTable)+8)
	for _, p := range paramTable {
		if p.name != attrMetricSource {
			out = append(out, p)
			continue
		}
		p.def, p.doc = "`"+sources.Default()+"`", sources.Names("`")
		out = append(out, p)
		for _, a := range sources.Attributes() {
			out = append(out, param{name: a.Name, kind: metricKind(a.Kind), signal: true, def: a.DefaultDoc, doc: a.Doc})
		}
	}
	return out
}

// lookupParamIn returns the declaration of an attribute, the sources'
// query attributes included.
func lookupParamIn(sources metric.Sources, name string) (param, bool) {
	if p, ok := lookupParam(name); ok {
		return p, true
	}
	if a, ok := sources.Attribute(name); ok {
		return param{name: a.Name, kind: metricKind(a.Kind), signal: true, def: a.DefaultDoc, doc: a.Doc}, true
	}
	return param{}, false
}

// signalAttrNames are the attributes a signal of `signals` may set with
// sources: those declared per signal, with every source's query attributes
// after metric_source.
func signalAttrNames(sources metric.Sources) []string {
	var names []string
	for _, p := range paramsFor(sources) {
		if p.signal {
			names = append(names, p.name)
		}
	}
	return names
}

// cloneQuery returns q with its maps copied.
func cloneQuery(q metric.Query) metric.Query {
	q.Dimensions = maps.Clone(q.Dimensions)
	q.Spec = maps.Clone(q.Spec)
	return q
}
