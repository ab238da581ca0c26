package loop_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// valid returns a valid PARAMS item; edit changes it.
func valid(edit func(a map[string]any)) map[string]any {
	a := map[string]any{
		"setpoint": 70.0, "kp": 2.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "orders-db"},
	}
	if edit != nil {
		edit(a)
	}
	return a
}

// wantRefused fails t unless err is a *loop.ParamsError that refuses field
// with a reason that says says.
func wantRefused(t *testing.T, err error, field, says string) {
	t.Helper()
	var pe *loop.ParamsError
	if !errors.As(err, &pe) {
		t.Fatalf("DecodeParams = %v; want a *ParamsError", err)
	}
	if !slices.ContainsFunc(pe.Fields, func(f loop.FieldError) bool { return f.Field == field && strings.Contains(f.Reason, says) }) {
		t.Errorf("DecodeParams = %v; want field %s refused saying %q", err, field, says)
	}
}

// wantRoundTrip fails t unless p's attributes decode to p again; what names
// p in a failure.
func wantRoundTrip(t *testing.T, what string, p loop.Params) {
	t.Helper()
	back, err := loop.DecodeParams(p.Loop, p.Attrs(looptest.Sources()), looptest.Sources())
	if err != nil {
		t.Fatalf("%s: DecodeParams(Attrs(), looptest.Sources()) = %v", what, err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("%s: DecodeParams(Attrs(), looptest.Sources()) =\n%+v\nwant\n%+v", what, back, p)
	}
	// STATE keeps the parameters in force as JSON in the same shape.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("%s: json.Marshal = %v", what, err)
	}
	var fromJSON loop.Params
	if err := json.Unmarshal(b, &fromJSON); err != nil || !reflect.DeepEqual(fromJSON, p) {
		t.Fatalf("%s: json.Unmarshal(%s) = %+v, %v; want %+v", what, b, fromJSON, err, p)
	}
}

func TestDecodeParamsDefaults(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(nil), looptest.Sources())
	if err != nil {
		t.Fatalf("DecodeParams(valid, looptest.Sources()) = %v", err)
	}
	want := loop.Params{
		Loop: "orders", Enabled: true, Mode: loop.ModeAuto,
		Controls: loop.Controls{Setpoint: 70, Kp: 2, Ki: 0.05, AntiWindup: control.AntiWindupConditional},
		MinRate:  10, MaxRate: 1000,
		TickPeriod: time.Minute, RateTTL: 3 * time.Minute,
		Sensing: loop.Sensing{Metric: metric.Query{Source: cwmetric.Name, Namespace: "AWS/RDS", Metric: "CPUUtilization",
			Dimensions: map[string]string{"DBInstanceIdentifier": "orders-db"}, Statistic: "Average", Period: time.Minute},
			Stale:      control.StalePolicy{Action: control.StaleHold, SafeRate: 10, DecayTime: 5 * time.Minute},
			StaleAfter: 5 * time.Minute},
		DemandHeadroom: loop.DefaultDemandHeadroom, Ceiling: loop.DefaultCeiling,
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("DecodeParams(valid, looptest.Sources()) =\n%+v\nwant\n%+v", p, want)
	}
}

func TestParamsAttrsRoundTrip(t *testing.T) {
	items := []map[string]any{
		valid(nil),
		valid(func(a map[string]any) {
			a["mode"] = "manual"
			a["manual_rate"] = 200.0
			a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"] = 0.05, 10.0, "15s", "5s"
			a["anti_windup"] = "back-calculation"
			a["tracking_time"] = "2m"
			a["setpoint_filter"] = "90s"
			a["derivative_filter"] = "10s"
			a["kd"] = 3.0
			a["stale_policy"], a["safe_rate"], a["stale_decay"], a["stale_grace"] = "decay", 50.0, "3m", "1m"
		}),
		valid(func(a map[string]any) {
			delete(a, "metric_dimensions")
			a["metric_source"], a["metric_promql"] = "prometheus", `max(rate(process_cpu_seconds_total{job="mysql"}[1m])) * 100`
			a["mode"], a["enabled"] = "shadow", false
			a["anti_windup"] = "none"
		}),
		valid(func(a map[string]any) {
			delete(a, "metric_dimensions")
			a["nodes"] = nodesAttr()
		}),
		valid(func(a map[string]any) {
			a["nodes"] = nodesAttr()
			a["regulate"], a["balance_kp"], a["balance_min_share"] = "mean", 0.1, 0.05
		}),
		valid(func(a map[string]any) {
			delete(a, "metric_dimensions")
			a["metric_source"] = "prometheus"
			a["nodes"] = map[string]any{"web-1": map[string]any{"endpoint": "https://web-1.internal/ingest", "metric": `rate(cpu{host="web-1"}[1m])`}}
			a["regulate"], a["balance_ki"] = "max", 0.02
		}),
	}
	for i, item := range items {
		p, err := loop.DecodeParams("l", item, looptest.Sources())
		if err != nil {
			t.Fatalf("item %d: DecodeParams = %v", i, err)
		}
		wantRoundTrip(t, fmt.Sprintf("item %d", i), p)
	}
}

// invalidEdits are refused edits, each with the attribute the refusal must
// name. The e2e test uses the same kinds of edits through the aws CLI.
var invalidEdits = []struct {
	name  string
	edit  func(a map[string]any)
	field string
}{
	{"negative kp", func(a map[string]any) { a["kp"] = -1.0 }, "kp"},
	{"negative ki", func(a map[string]any) { a["ki"] = -0.5 }, "ki"},
	{"negative kd", func(a map[string]any) { a["kd"] = -2.0 }, "kd"},
	{"NaN kp", func(a map[string]any) { a["kp"] = math.NaN() }, "kp"},
	{"infinite ki", func(a map[string]any) { a["ki"] = math.Inf(1) }, "ki"},
	{"non-numeric kp", func(a map[string]any) { a["kp"] = "fast" }, "kp"},
	{"kp as a boolean", func(a map[string]any) { a["kp"] = true }, "kp"},
	{"min above max", func(a map[string]any) { a["min_rate"] = 2000.0 }, "min_rate"},
	{"min equals max", func(a map[string]any) { a["min_rate"] = 1000.0 }, "min_rate"},
	{"negative min", func(a map[string]any) { a["min_rate"] = -1.0 }, "min_rate"},
	{"zero max", func(a map[string]any) { a["max_rate"] = 0.0; a["min_rate"] = 0.0 }, "max_rate"},
	{"setpoint zero", func(a map[string]any) { a["setpoint"] = 0.0 }, "setpoint"},
	{"setpoint negative", func(a map[string]any) { a["setpoint"] = -5.0 }, "setpoint"},
	{"setpoint above 100", func(a map[string]any) { a["setpoint"] = 100.5 }, "setpoint"},
	{"setpoint as text", func(a map[string]any) { a["setpoint"] = "70" }, "setpoint"},
	{"unknown mode", func(a map[string]any) { a["mode"] = "turbo" }, "mode"},
	{"mode as a number", func(a map[string]any) { a["mode"] = 1.0 }, "mode"},
	{"manual without rate", func(a map[string]any) { a["mode"] = "manual" }, "manual_rate"},
	{"manual rate above max", func(a map[string]any) { a["mode"] = "manual"; a["manual_rate"] = 5000.0 }, "manual_rate"},
	{"unknown stale policy", func(a map[string]any) { a["stale_policy"] = "panic" }, "stale_policy"},
	{"negative safe rate", func(a map[string]any) { a["stale_policy"] = "decay"; a["safe_rate"] = -3.0 }, "safe_rate"},
	{"missing setpoint", func(a map[string]any) { delete(a, "setpoint") }, "setpoint"},
	{"missing kp", func(a map[string]any) { delete(a, "kp") }, "kp"},
	{"missing min rate", func(a map[string]any) { delete(a, "min_rate") }, "min_rate"},
	{"missing max rate", func(a map[string]any) { delete(a, "max_rate") }, "max_rate"},
	{"bad duration", func(a map[string]any) { a["tick_period"] = "soon" }, "tick_period"},
	{"duration as a number", func(a map[string]any) { a["tick_period"] = 60.0 }, "tick_period"},
	{"tick too short", func(a map[string]any) { a["tick_period"] = "100ms" }, "tick_period"},
	{"negative setpoint filter", func(a map[string]any) { a["setpoint_filter"] = "-1m" }, "setpoint_filter"},
	{"unknown anti-windup", func(a map[string]any) { a["anti_windup"] = "magic" }, "anti_windup"},
	{"unknown source", func(a map[string]any) { a["metric_source"] = "graphite" }, "metric_source"},
	{"prometheus without query", func(a map[string]any) { a["metric_source"] = "prometheus" }, "metric_promql"},
	{"cloudwatch without dimensions", func(a map[string]any) { delete(a, "metric_dimensions") }, "metric_dimensions"},
	{"dimension value not a string", func(a map[string]any) { a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": 3.0} }, "metric_dimensions.DBInstanceIdentifier"},
	{"dimensions as a string", func(a map[string]any) { a["metric_dimensions"] = "orders-db" }, "metric_dimensions"},
	{"bad metric period", func(a map[string]any) { a["metric_period"] = "45s" }, "metric_period"},
	{"enabled as a string", func(a map[string]any) { a["enabled"] = "yes" }, "enabled"},
	{"zero feedforward gain", func(a map[string]any) { a["ff_gain"] = 0.0 }, "ff_gain"},
	{"feedforward without gain", func(a map[string]any) { a["ff_base"] = 10.0 }, "ff_gain"},
	{"rate ttl shorter than tick", func(a map[string]any) { a["rate_ttl"] = "30s" }, "rate_ttl"},
	{"rate ttl beyond ten ticks", func(a map[string]any) { a["rate_ttl"] = "11m" }, "rate_ttl"},
	{"all gains zero", func(a map[string]any) { a["kp"] = 0.0; a["ki"] = 0.0 }, "kp"},
	{"unknown attribute", func(a map[string]any) { a["kpp"] = 1.0 }, "kpp"},
	{"null setpoint", func(a map[string]any) { a["setpoint"] = nil }, "setpoint"},
	{"decay without time", func(a map[string]any) { a["stale_policy"] = "decay"; a["stale_decay"] = "0s" }, "stale_decay"},
	{"nodes as a list", func(a map[string]any) { a["nodes"] = []any{"http://a/"} }, "nodes"},
	{"node as a string", func(a map[string]any) { a["nodes"] = map[string]any{"a": "http://a/"} }, "nodes.a"},
	{"node without endpoint", func(a map[string]any) { a["nodes"] = map[string]any{"a": map[string]any{"metric": "db-a"}} }, "nodes.a.endpoint"},
	{"node without metric", func(a map[string]any) { a["nodes"] = map[string]any{"a": map[string]any{"endpoint": "http://a/"}} }, "nodes.a.metric"},
	{"node endpoint not a URL", func(a map[string]any) { a["nodes"] = nodesAttr(); node(a, "b")["endpoint"] = "db-b:3306" }, "nodes.b.endpoint"},
	{"node endpoint as a number", func(a map[string]any) { a["nodes"] = nodesAttr(); node(a, "b")["endpoint"] = 8080.0 }, "nodes.b.endpoint"},
	{"two nodes, one endpoint", func(a map[string]any) {
		a["nodes"] = nodesAttr()
		node(a, "c")["endpoint"] = node(a, "a")["endpoint"]
	}, "nodes.c.endpoint"},
	{"node unknown attribute", func(a map[string]any) { a["nodes"] = nodesAttr(); node(a, "a")["weight"] = "0.5" }, "nodes.a.weight"},
	{"node empty metric", func(a map[string]any) { a["nodes"] = nodesAttr(); node(a, "a")["metric"] = " " }, "nodes.a.metric"},
	{"node bad dimensions", func(a map[string]any) { a["nodes"] = nodesAttr(); node(a, "a")["metric"] = "=db-a" }, "nodes.a.metric"},
	{"node bare value, two loop dimensions", func(a map[string]any) {
		a["metric_dimensions"] = map[string]any{"A": "x", "B": "y"}
		a["nodes"] = nodesAttr()
	}, "nodes.a.metric"},
	{"prometheus node without query", func(a map[string]any) {
		a["metric_source"], a["metric_promql"] = "prometheus", "up"
		a["nodes"] = nodesAttr()
		node(a, "b")["metric"] = ""
	}, "nodes.b.metric"},
	{"unknown regulate", func(a map[string]any) { a["regulate"] = "min" }, "regulate"},
	{"regulate as a number", func(a map[string]any) { a["regulate"] = 1.0 }, "regulate"},
	{"negative balance kp", func(a map[string]any) { a["balance_kp"] = -0.1 }, "balance_kp"},
	{"zero balance ki", func(a map[string]any) { a["balance_ki"] = 0.0 }, "balance_ki"},
	{"NaN balance ki", func(a map[string]any) { a["balance_ki"] = math.NaN() }, "balance_ki"},
	{"balance min share above 1", func(a map[string]any) { a["balance_min_share"] = 1.5 }, "balance_min_share"},
	{"balance max share below 1", func(a map[string]any) { a["balance_max_share"] = 0.5 }, "balance_max_share"},
	{"balance min mean above 100", func(a map[string]any) { a["balance_min_mean"] = 101.0 }, "balance_min_mean"},
	{"balance kp as text", func(a map[string]any) { a["balance_kp"] = "0.3" }, "balance_kp"},
}

// nodesAttr returns a valid nodes attribute of three nodes a, b, c.
func nodesAttr() map[string]any {
	return map[string]any{
		"a": map[string]any{"endpoint": "http://10.0.0.1:8080/ingest", "metric": "db-a"},
		"b": map[string]any{"endpoint": "http://10.0.0.2:8080/ingest", "metric": "DBInstanceIdentifier=db-b"},
		"c": map[string]any{"endpoint": "http://10.0.0.3:8080/ingest", "metric": "db-c"},
	}
}

// node returns the attributes of node name in a's nodes attribute.
func node(a map[string]any, name string) map[string]any {
	return a["nodes"].(map[string]any)[name].(map[string]any)
}

func TestDecodeParamsNodes(t *testing.T) {
	p, err := loop.DecodeParams("fleet", valid(func(a map[string]any) {
		a["nodes"] = nodesAttr()
		a["tick_period"] = "15s"
	}), looptest.Sources())
	if err != nil {
		t.Fatalf("DecodeParams(nodes, looptest.Sources()) = %v", err)
	}
	if len(p.Nodes) != 3 || p.Nodes[0].Name != "a" || p.Nodes[2].Name != "c" {
		t.Fatalf("Nodes = %+v; want a, b, c in name order", p.Nodes)
	}
	if p.Regulation() != loop.RegulateMax || p.Balance != nil {
		t.Errorf("Regulation() = %q, Balance = %v; want max and nil (defaults)", p.Regulation(), p.Balance)
	}
	if got, want := p.BalanceConfig(), balance.DefaultConfig(); got != want {
		t.Errorf("BalanceConfig() at a 15 s tick = %+v; want balance.DefaultConfig() %+v", got, want)
	}
	p60, err := loop.DecodeParams("fleet", valid(func(a map[string]any) { a["nodes"] = nodesAttr() }), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p60.BalanceConfig().IntegralGain, balance.DefaultConfig().IntegralGain/4; math.Abs(got-want) > 1e-15 {
		t.Errorf("balance ki at a 1 min tick = %v; want %v (a quarter of the 15 s default)", got, want)
	}
	for _, tt := range []struct {
		node string
		want map[string]string
	}{
		{"a", map[string]string{"DBInstanceIdentifier": "db-a"}},
		{"b", map[string]string{"DBInstanceIdentifier": "db-b"}},
	} {
		n := p.Nodes[slices.IndexFunc(p.Nodes, func(n loop.Node) bool { return n.Name == tt.node })]
		q := p.NodeQuery(looptest.Sources(), n)
		if !reflect.DeepEqual(q.Dimensions, tt.want) || q.Namespace != p.Metric.Namespace || q.Period != p.Metric.Period {
			t.Errorf("NodeQuery(%s) = %+v; want the loop's query with dimensions %v", tt.node, q, tt.want)
		}
	}
	if got := p.Metric.Dimensions["DBInstanceIdentifier"]; got != "orders-db" {
		t.Errorf("NodeQuery changed the loop's dimensions: %v", p.Metric.Dimensions)
	}
	var endpoints []string
	for _, n := range p.Nodes {
		endpoints = append(endpoints, n.Endpoint)
	}
	if !reflect.DeepEqual(endpoints, []string{"http://10.0.0.1:8080/ingest", "http://10.0.0.2:8080/ingest", "http://10.0.0.3:8080/ingest"}) {
		t.Errorf("nodes' endpoints in node-name order = %v", endpoints)
	}
	// Without metric_dimensions, a bare value names DBInstanceIdentifier
	// and Name=value pairs stand alone.
	p2, err := loop.DecodeParams("fleet", valid(func(a map[string]any) {
		delete(a, "metric_dimensions")
		a["nodes"] = nodesAttr()
		node(a, "b")["metric"] = "InstanceId=i-1, AutoScalingGroupName=web"
	}), looptest.Sources())
	if err != nil {
		t.Fatalf("DecodeParams(nodes, no metric_dimensions, looptest.Sources()) = %v", err)
	}
	if got := p2.NodeQuery(looptest.Sources(), p2.Nodes[0]).Dimensions; !reflect.DeepEqual(got, map[string]string{"DBInstanceIdentifier": "db-a"}) {
		t.Errorf("NodeQuery(a) dimensions = %v", got)
	}
	if got := p2.NodeQuery(looptest.Sources(), p2.Nodes[1]).Dimensions; !reflect.DeepEqual(got, map[string]string{"InstanceId": "i-1", "AutoScalingGroupName": "web"}) {
		t.Errorf("NodeQuery(b) dimensions = %v", got)
	}
	if p2.Metric.Dimensions != nil {
		t.Errorf("loop dimensions = %v; want none", p2.Metric.Dimensions)
	}
}

func TestParseParamValueNodes(t *testing.T) {
	v, err := loop.ParseParamValue(looptest.Sources(), "nodes", `{"a": {"endpoint": "http://a:80/", "metric": "db-a"}}`)
	if err != nil {
		t.Fatalf("ParseParamValue(looptest.Sources(), nodes) = %v", err)
	}
	p, err := loop.DecodeParams("l", valid(func(a map[string]any) { a["nodes"] = v }), looptest.Sources())
	if err != nil || len(p.Nodes) != 1 || p.Nodes[0] != (loop.Node{Name: "a", Endpoint: "http://a:80/", Metric: "db-a"}) {
		t.Errorf("DecodeParams(ParseParamValue(looptest.Sources(), nodes), looptest.Sources()) = %+v, %v", p.Nodes, err)
	}
	if _, err := loop.ParseParamValue(looptest.Sources(), "nodes", "a=http://a/"); err == nil {
		t.Errorf("ParseParamValue(looptest.Sources(), nodes, not JSON) accepted")
	}
}

func TestDecodeParamsRefusals(t *testing.T) {
	for _, tt := range invalidEdits {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loop.DecodeParams("orders", valid(tt.edit), looptest.Sources())
			var pe *loop.ParamsError
			if !errors.As(err, &pe) {
				t.Fatalf("DecodeParams = %v; want a *loop.ParamsError", err)
			}
			found := false
			for _, f := range pe.Fields {
				if f.Reason == "" {
					t.Errorf("field %s refused without a reason", f.Field)
				}
				if f.Field == tt.field {
					found = true
				}
			}
			if !found {
				t.Errorf("refusal %q does not name %s", pe.Reason(), tt.field)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
		})
	}
}

func TestDecodeParamsMissingItem(t *testing.T) {
	if _, err := loop.DecodeParams("x", nil, looptest.Sources()); !errors.Is(err, loop.ErrParamsMissing) {
		t.Errorf("DecodeParams(nil, looptest.Sources()) = %v; want loop.ErrParamsMissing", err)
	}
}

func TestFingerprint(t *testing.T) {
	a, b := valid(nil), valid(func(a map[string]any) { a["kp"] = 2.5 })
	if loop.Fingerprint(a) == loop.Fingerprint(b) {
		t.Errorf("different items share the fingerprint %s", loop.Fingerprint(a))
	}
	if loop.Fingerprint(a) != loop.Fingerprint(valid(nil)) {
		t.Errorf("equal items have different fingerprints")
	}
	if loop.Fingerprint(valid(func(a map[string]any) { a["kp"] = math.NaN() })) == "" {
		t.Errorf("an item with NaN has no fingerprint")
	}
}

// FuzzDecodeParams decodes arbitrary JSON items: no panic, and every
// refusal names a field and gives a reason.
func FuzzDecodeParams(f *testing.F) {
	seed, _ := json.Marshal(valid(nil))
	f.Add(seed)
	f.Add([]byte(`{"setpoint": 101, "kp": -1, "min_rate": 5, "max_rate": 1}`))
	f.Add([]byte(`{"setpoint": "x", "mode": "manual", "tick_period": "-1s", "metric_dimensions": {"a": 1}}`))
	f.Add([]byte(`{"metric_source": "prometheus", "metric_promql": "up", "setpoint": 50, "kp": 1, "min_rate": 0, "max_rate": 10}`))
	f.Add([]byte(`{}`))
	withNodes, _ := json.Marshal(valid(func(a map[string]any) {
		a["nodes"] = nodesAttr()
		a["regulate"], a["balance_kp"] = "mean", 0.2
	}))
	f.Add(withNodes)
	f.Add([]byte(`{"setpoint": 50, "kp": 1, "min_rate": 0, "max_rate": 10, "nodes": {"a": {"endpoint": "http://a/", "metric": "x"}, "b": {"endpoint": "http://a/", "metric": ""}}, "regulate": "min", "balance_ki": -1}`))
	f.Add([]byte(`{"metric_source": "prometheus", "metric_promql": "up", "setpoint": 50, "kp": 1, "min_rate": 0, "max_rate": 10, "nodes": {"": {"endpoint": "ftp://x", "metric": 1}, "b": "c"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var attrs map[string]any
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber()
		if err := dec.Decode(&attrs); err != nil || attrs == nil {
			return
		}
		p, err := loop.DecodeParams("fuzz", attrs, looptest.Sources())
		if err == nil {
			if verr := p.Validate(looptest.Sources()); verr != nil {
				t.Fatalf("DecodeParams accepted %s but Validate refuses: %v", data, verr)
			}
			wantRoundTrip(t, string(data), p)
			return
		}
		var pe *loop.ParamsError
		if !errors.As(err, &pe) {
			t.Fatalf("DecodeParams(%s, looptest.Sources()) = %v; want a *loop.ParamsError", data, err)
		}
		if len(pe.Fields) == 0 {
			t.Fatalf("DecodeParams(%s, looptest.Sources()) refused without a field", data)
		}
		for _, fe := range pe.Fields {
			if fe.Field == "" || strings.TrimSpace(fe.Reason) == "" {
				t.Fatalf("DecodeParams(%s, looptest.Sources()): refusal %+v lacks a field or reason", data, fe)
			}
		}
	})
}

// TestDecodeParamsRefusesInvalidStatistic: a statistic that would fail the
// CloudWatch batch of every loop is refused with the field's name.
func TestDecodeParamsRefusesInvalidStatistic(t *testing.T) {
	a := valid(func(a map[string]any) { a["metric_statistic"] = "Averge" })
	_, err := loop.DecodeParams("l", a, looptest.Sources())
	if err == nil || !strings.Contains(err.Error(), "metric_statistic") {
		t.Errorf("DecodeParams(metric_statistic Averge, looptest.Sources()) = %v; want a refusal naming metric_statistic", err)
	}
}

// TestDecodeParamsIgnoresEditVersion: the edit version that orders
// conditional edits is not a parameter.
func TestDecodeParamsIgnoresEditVersion(t *testing.T) {
	a := valid(func(a map[string]any) { a[loop.AttrEditVersion] = 3.0 })
	if _, err := loop.DecodeParams("l", a, looptest.Sources()); err != nil {
		t.Errorf("DecodeParams(edit_version 3, looptest.Sources()) = %v; want valid", err)
	}
	if v := loop.ParamsVersion(a); v != 3 {
		t.Errorf("ParamsVersion = %d; want 3", v)
	}
}

// adapt_gain turns on the controller's gain adaptation, round-trips, and
// needs the delay-aware integrator.
func TestDecodeParamsAdaptGain(t *testing.T) {
	model := func(a map[string]any) {
		a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"] = 0.05, 10.0, "15s", "5s"
		a["adapt_gain"] = true
	}
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) { model(a); a["delay_aware"] = true }), looptest.Sources())
	if err != nil {
		t.Fatalf("DecodeParams(adapt_gain, delay_aware, looptest.Sources()) = %v", err)
	}
	if !p.AdaptGain || !p.ControlConfig().AdaptGain {
		t.Errorf("AdaptGain = %v, ControlConfig().AdaptGain = %v; want both true", p.AdaptGain, p.ControlConfig().AdaptGain)
	}
	wantRoundTrip(t, "adapt_gain", p)
	_, err = loop.DecodeParams("orders", valid(model), looptest.Sources())
	wantRefused(t, err, "adapt_gain", "delay_aware=true")
}

// depth_retention is SQS's MessageRetentionPeriod: 60 s .. 14 d; absent, the
// retention is unknown (zero), not SQS's default.
func TestDepthRetentionBounds(t *testing.T) {
	for _, bad := range []string{"59s", "337h", "0s"} {
		_, err := loop.DecodeParams("t", valid(func(a map[string]any) { a["depth_retention"] = bad }), looptest.Sources())
		wantRefused(t, err, "depth_retention", "must be a duration in [1m0s, 336h0m0s]")
	}
	for in, want := range map[string]time.Duration{"60s": time.Minute, "336h": 14 * 24 * time.Hour, "": 0} {
		p, err := loop.DecodeParams("t", valid(func(a map[string]any) {
			if in != "" {
				a["depth_retention"] = in
			}
		}), looptest.Sources())
		if err != nil || p.DepthRetention != want {
			t.Errorf("depth_retention %q: %v, %v; want %v", in, p.DepthRetention, err, want)
		}
		if in != "" {
			wantRoundTrip(t, "depth_retention "+in, p)
		}
	}
}
