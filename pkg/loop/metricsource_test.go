package loop_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// constSource is a metric source defined here alone: its query is one
// attribute, metric_value, the value its reader answers.
type constSource struct{}

const attrConstValue = "metric_value"

func (constSource) Name() string { return "constant" }

func (constSource) Attributes() []metric.Attribute {
	return []metric.Attribute{{Name: attrConstValue, Kind: metric.KindNumber, DefaultDoc: "required", Doc: "the value, percent"}}
}

func (constSource) Decode(v metric.Values, _ metric.Use) metric.Query {
	if _, ok := v[attrConstValue]; !ok {
		return metric.Query{}
	}
	return metric.Query{Spec: map[string]string{attrConstValue: strconv.FormatFloat(v.Number(attrConstValue), 'g', -1, 64)}}
}

func (constSource) Encode(q metric.Query, _ metric.Use) metric.Values {
	f, _ := strconv.ParseFloat(q.Spec[attrConstValue], 64)
	return metric.Values{attrConstValue: f}
}

func (constSource) Validate(q metric.Query, _ metric.Use) []metric.FieldError {
	f, err := strconv.ParseFloat(q.Spec[attrConstValue], 64)
	if err != nil || f < 0 || f > 100 {
		return []metric.FieldError{{Attr: attrConstValue, Reason: "want a percentage in [0, 100]"}}
	}
	return nil
}

func (constSource) Node(q metric.Query, text string) (metric.Query, error) {
	return q, errors.New("a constant has no nodes")
}

func (constSource) Key(q metric.Query) string { return q.Spec[attrConstValue] }

// constReader answers every query with its value, stamped now.
type constReader struct{}

func (constReader) ReadMetrics(_ context.Context, qs []metric.Query, now time.Time) ([]metric.Sample, error) {
	out := make([]metric.Sample, len(qs))
	for i, q := range qs {
		f, err := strconv.ParseFloat(q.Spec[attrConstValue], 64)
		out[i] = metric.Sample{Value: f, Time: now, Found: err == nil, Err: err}
	}
	return out, nil
}

// TestThirdMetricSource: PARAMS naming a source the decoder is given decode
// by that source's rules, are checked by them, encode back to themselves
// and tick on its reader; without it they are refused.
func TestThirdMetricSource(t *testing.T) {
	sources := append(looptest.Sources(), constSource{})
	attrs := map[string]any{
		"setpoint": 60.0, "kp": 1.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 500.0,
		"metric_source": "constant", "metric_value": 42.0,
	}
	p, err := loop.DecodeParams("c", attrs, sources)
	if err != nil {
		t.Fatalf("DecodeParams(constant) = %v", err)
	}
	if p.Metric.Source != "constant" || p.Metric.Spec[attrConstValue] != "42" || p.Metric.Namespace != "" {
		t.Errorf("DecodeParams(constant).Metric = %+v; want source constant, value 42, nothing of CloudWatch's", p.Metric)
	}
	back := p.Attrs(sources)
	if back["metric_value"] != 42.0 || back["metric_source"] != "constant" || back["metric_namespace"] != nil {
		t.Errorf("Attrs = %v; want metric_source constant, metric_value 42 and no CloudWatch attribute", back)
	}
	if q, err := loop.DecodeParams("c", back, sources); err != nil || q.Metric.Spec[attrConstValue] != "42" {
		t.Errorf("DecodeParams(Attrs()) = %+v, %v; want the same query", q.Metric, err)
	}

	bad := map[string]any{}
	for k, v := range attrs {
		bad[k] = v
	}
	bad["metric_value"] = 250.0
	if _, err := loop.DecodeParams("c", bad, sources); err == nil || !strings.Contains(err.Error(), "metric_value: want a percentage") {
		t.Errorf("DecodeParams(metric_value 250) = %v; want the source's refusal", err)
	}
	if _, err := loop.DecodeParams("c", attrs, looptest.Sources()); err == nil || !strings.Contains(err.Error(), `unknown source "constant"`) {
		t.Errorf("DecodeParams without the constant source = %v; want metric_source refused", err)
	}

	store := memstore.New()
	if err := store.WriteParams(context.Background(), "c", attrs); err != nil {
		t.Fatal(err)
	}
	tk := &loop.Ticker{Store: store, Sources: sources, Metrics: map[string]metric.Reader{"constant": constReader{}}, Now: time.Now}
	reports, err := tk.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := reports[0]; r.Outcome != loop.OutcomeApplied || r.Stale || r.Measured != 42 || !r.RateWritten {
		t.Errorf("tick on the constant source = %+v; want applied, fresh, measured 42, rate written", r)
	}
}
