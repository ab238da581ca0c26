package loop_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// lagSignal is a replication-lag signal read from Prometheus.
func lagSignal(edit func(s map[string]any)) map[string]any {
	s := map[string]any{
		"setpoint": 10.0, "unit": "s", "kp": 20.0, "ki": 0.05, "kd": 30.0, "derivative_filter": "30s",
		"metric_source": "prometheus", "metric_promql": "max(mysql_slave_status_seconds_behind_master)",
		"stale_policy": "fail-closed", "stale_after": "2m",
	}
	if edit != nil {
		edit(s)
	}
	return s
}

func TestDecodeSignals(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["signals"] = map[string]any{
			"lag": lagSignal(nil),
			"p99": map[string]any{"setpoint": 250.0, "unit": "ms", "kp": 2.0, "metric_name": "TargetResponseTime",
				"metric_namespace": "AWS/ApplicationELB", "metric_statistic": "p99",
				"metric_dimensions": map[string]any{"LoadBalancer": "app/orders"}},
		}
	}), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.SignalNames(); !reflect.DeepEqual(got, []string{"cpu", "lag", "p99"}) {
		t.Fatalf("SignalNames = %v", got)
	}
	lag := p.Signals[0]
	want := loop.Signal{Name: "lag",
		Controls: loop.Controls{Unit: "s", Setpoint: 10, Kp: 20, Ki: 0.05, Kd: 30, DerivativeFilter: 30 * time.Second, AntiWindup: control.AntiWindupConditional},
		Sensing: loop.Sensing{Metric: metric.Query{Source: prommetric.Name, PromQL: "max(mysql_slave_status_seconds_behind_master)"},
			Stale:      control.StalePolicy{Action: control.StaleFailClosed, DecayTime: 5 * time.Minute},
			StaleAfter: 2 * time.Minute}}
	if !reflect.DeepEqual(lag, want) {
		t.Errorf("lag signal\n got %+v\nwant %+v", lag, want)
	}
	if p.Signals[1].Metric.Statistic != "p99" || p.Signals[1].Metric.Period != time.Minute {
		t.Errorf("p99 signal's CloudWatch query: %+v", p.Signals[1].Metric)
	}
	// A signal in seconds is not a percentage: 150 s of lag is a valid
	// measurement, and the ceiling cut is off.
	cc := p.ForSignal(lag).ControlConfig()
	if !cc.ValidMeasurement(150) || cc.ValidMeasurement(-1) || cc.Ceiling != 0 {
		t.Errorf("lag controller: valid(150) %v, valid(-1) %v, ceiling %v", cc.ValidMeasurement(150), cc.ValidMeasurement(-1), cc.Ceiling)
	}
	if cc.Min != p.MinRate || cc.Max != p.MaxRate || cc.Slew != p.SlewLimit {
		t.Errorf("lag controller bounds %v..%v slew %v; want the loop's", cc.Min, cc.Max, cc.Slew)
	}
	// Encoding and decoding again gives the same parameters.
	wantRoundTrip(t, "signals", p)
}

func TestDecodeSignalsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(a map[string]any)
		field string
		says  string
	}{
		{"two signals with one name", func(a map[string]any) { a["signals"] = map[string]any{"cpu": lagSignal(nil)} }, "signals.cpu", "second signal named cpu"},
		{"named first signal", func(a map[string]any) {
			a["signal"] = "lag"
			a["signals"] = map[string]any{"lag": lagSignal(nil)}
		}, "signals.lag", "second signal"},
		{"no setpoint", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { delete(s, "setpoint") })}
		}, "signals.lag.setpoint", "missing"},
		{"no kp", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { delete(s, "kp") })}
		}, "signals.lag.kp", "missing"},
		{"bad name", func(a map[string]any) { a["signals"] = map[string]any{"Lag!": lagSignal(nil)} }, `signals."Lag!"`, "a-z"},
		{"bad first name", func(a map[string]any) { a["signal"] = "CPU load" }, "signal", "a-z"},
		{"floor", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { s["direction"] = "floor" })}
		}, "signals.lag.direction", "only ceiling"},
		{"floor at the top level", func(a map[string]any) { a["direction"] = "floor" }, "direction", "only ceiling"},
		{"loop-wide attribute", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { s["max_rate"] = 5.0 })}
		}, "signals.lag.max_rate", "loop-wide"},
		{"bad promql", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { s["metric_promql"] = " " })}
		}, "signals.lag.metric_promql", "PromQL"},
		{"bad gain", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { s["ki"] = -1.0 })}
		}, "signals.lag.ki", ">= 0"},
		{"not a map", func(a map[string]any) { a["signals"] = "lag" }, "signals", "map"},
		{"drain of a percentage", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { s["unit"], s["drain_feedforward"] = "%", true })}
		}, "signals.lag.drain_feedforward", "unit s"},
		{"drain with a model", func(a map[string]any) {
			a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) {
				s["drain_feedforward"], s["ff_gain"], s["ff_base"], s["ff_tau"], s["ff_dead_time"] = true, 0.1, 0.0, "1m", "30s"
			})}
		}, "signals.lag.drain_feedforward", "without a feedforward model"},
		{"drain of the first signal", func(a map[string]any) { a["drain_feedforward"] = true }, "drain_feedforward", "only a further signal"},
		{"too many", func(a map[string]any) {
			m := map[string]any{}
			for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				m[n] = lagSignal(nil)
			}
			a["signals"] = m
		}, "signals", "at most 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loop.DecodeParams("orders", valid(tc.edit), looptest.Sources())
			wantRefused(t, err, tc.field, tc.says)
		})
	}
}

// An item without signal attributes decodes to a one-signal loop named cpu:
// what it decoded to before signals existed.
func TestDecodeOneSignalUnchanged(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(nil), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if p.Signals != nil || p.SignalName != "" || p.Unit != "" || p.FirstSignal() != "cpu" {
		t.Errorf("one-signal item: signals %v, name %q, unit %q", p.Signals, p.SignalName, p.Unit)
	}
	for _, k := range []string{"signal", "unit", "direction", "signals"} {
		if _, ok := p.Attrs(looptest.Sources())[k]; ok {
			t.Errorf("Attrs writes %s for a one-signal item", k)
		}
	}
}

// direction is retired: an item written when it could be set, holding
// ceiling, still decodes, to the same parameters as without it.
func TestDirectionCeilingStillDecodes(t *testing.T) {
	with, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["direction"] = "ceiling"
		a["signals"] = map[string]any{"lag": lagSignal(func(s map[string]any) { s["direction"] = "ceiling" })}
	}), looptest.Sources())
	if err != nil {
		t.Fatalf("DecodeParams(direction=ceiling) = %v", err)
	}
	without, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["signals"] = map[string]any{"lag": lagSignal(nil)}
	}), looptest.Sources())
	if err != nil || !reflect.DeepEqual(with, without) {
		t.Fatalf("with direction=ceiling %+v; without %+v (%v)", with, without, err)
	}
}

// The PARAMS example of docs/controller.md's signals section decodes to a
// loop with three signals.
func TestDocsSignalsExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/controller.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Signals (override control)")
	start := strings.Index(doc[i:], "--item '") + i + len("--item '")
	end := strings.Index(doc[start:], "}'") + start + 1
	var item map[string]any
	if err := json.Unmarshal([]byte(doc[start:end]), &item); err != nil {
		t.Fatalf("the example is not JSON: %v", err)
	}
	attrs := map[string]any{}
	for k, v := range item {
		if k != "pk" && k != "sk" {
			attrs[k] = fromDynamoJSON(t, v)
		}
	}
	p, err := loop.DecodeParams("orders", attrs, looptest.Sources())
	if err != nil {
		t.Fatalf("docs example refused: %v", err)
	}
	if got := strings.Join(p.SignalNames(), ","); got != "cpu,lag,p99" {
		t.Errorf("signals %s; want cpu,lag,p99", got)
	}
}

// fromDynamoJSON converts DynamoDB JSON ({"S": ...}, {"N": ...}, {"M": ...})
// into the values DecodeParams reads.
func fromDynamoJSON(t *testing.T, v any) any {
	m := v.(map[string]any)
	switch {
	case m["S"] != nil:
		return m["S"]
	case m["N"] != nil:
		f, err := strconv.ParseFloat(m["N"].(string), 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	case m["M"] != nil:
		out := map[string]any{}
		for k, x := range m["M"].(map[string]any) {
			out[k] = fromDynamoJSON(t, x)
		}
		return out
	}
	t.Fatalf("unexpected DynamoDB JSON %v", v)
	return nil
}

// `sluice params set` and the dashboard's form give signals as JSON text.
func TestParseParamValueSignals(t *testing.T) {
	v, err := loop.ParseParamValue(looptest.Sources(), "signals", `{"lag": {"setpoint": 10, "unit": "s", "kp": 20, "metric_source": "prometheus", "metric_promql": "max(lag)"}}`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) { a["signals"] = v }), looptest.Sources())
	if err != nil || len(p.Signals) != 1 || p.Signals[0].Setpoint != 10 {
		t.Fatalf("decoded %+v, %v", p.Signals, err)
	}
	if _, err := loop.ParseParamValue(looptest.Sources(), "signals", `lag=10`); err == nil {
		t.Error("ParseParamValue accepted text that is not a JSON object")
	}
}
