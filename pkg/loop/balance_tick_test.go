package loop_test

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fleetNodes returns a nodes attribute for nodes named in names: node x has
// endpoint http://x.fleet:8080/ and its metric's DBInstanceIdentifier is
// fleet-x.
func fleetNodes(names ...string) map[string]any {
	m := make(map[string]any, len(names))
	for _, n := range names {
		m[n] = map[string]any{"endpoint": endpoint(n), "metric": "fleet-" + n}
	}
	return m
}

func endpoint(node string) string { return "http://" + node + ".fleet:8080/" }

// fleet is a static plant for the tick tests: node x with capacity cap[x]
// (messages/s at 100 %) offered the share w of the rate R runs at
// min(100, base + 100 w R / cap).
type fleet struct {
	cap  map[string]float64
	base float64
}

// apply publishes every node's utilization under rate r (fresh metrics).
func (f fleet) apply(rg *rig, r protocol.Rate) map[string]float64 {
	y := make(map[string]float64, len(f.cap))
	for n, c := range f.cap {
		w := r.Weights[endpoint(n)]
		y[n] = math.Min(100, f.base+100*w*r.PerSecond/c)
		rg.cpu("fleet-"+n, y[n], 0)
	}
	return y
}

func maxAvg(y map[string]float64) (mx, avg float64) {
	for _, v := range y {
		mx = math.Max(mx, v)
		avg += v
	}
	return mx, avg / float64(len(y))
}

// runFleet ticks loop "fleet" n times against f, starting from equal shares
// at rate r0, and returns the last RATE and utilizations.
func runFleet(t *testing.T, rg *rig, f fleet, n int) (protocol.Rate, map[string]float64, loop.Report) {
	t.Helper()
	r := protocol.Rate{PerSecond: 100, Weights: map[string]float64{}}
	for name := range f.cap {
		r.Weights[endpoint(name)] = 1 / float64(len(f.cap))
	}
	var rep loop.Report
	for range n {
		f.apply(rg, r)
		rep = rg.tick("fleet")
		if rep.Outcome != loop.OutcomeApplied {
			t.Fatalf("tick %d: outcome %s (%v)", rep.Tick, rep.Outcome, rep.Err)
		}
		var err error
		if r, err = rg.store.ReadRate(context.Background(), "fleet"); err != nil {
			t.Fatal(err)
		}
	}
	return r, f.apply(rg, r), rep
}

func TestTickBalancesNodesAndRegulates(t *testing.T) {
	capacities := map[string]float64{"a": 100, "b": 200, "c": 300}
	for _, tt := range []struct {
		regulate string
		// what the rate loop holds at the setpoint
		held func(y map[string]float64) float64
	}{
		{"", func(y map[string]float64) float64 { m, _ := maxAvg(y); return m }},
		{"max", func(y map[string]float64) float64 { m, _ := maxAvg(y); return m }},
		{"mean", func(y map[string]float64) float64 { _, a := maxAvg(y); return a }},
	} {
		t.Run("regulate "+tt.regulate, func(t *testing.T) {
			rg := newRig(t)
			rg.params("fleet", func(a map[string]any) {
				a["nodes"] = fleetNodes("a", "b", "c")
				if tt.regulate != "" {
					a["regulate"] = tt.regulate
				}
			})
			r, y, rep := runFleet(t, rg, fleet{cap: capacities, base: 5}, 60)
			mx, avg := maxAvg(y)
			if mx/avg > 1.02 {
				t.Errorf("max/avg after 60 ticks = %.3f (utilizations %v); want <= 1.02", mx/avg, y)
			}
			if got := tt.held(y); math.Abs(got-70) > 1 {
				t.Errorf("regulated utilization = %.2f (utilizations %v, rate %.1f); want 70 +- 1", got, y, r.PerSecond)
			}
			var sum float64
			for n, c := range capacities {
				w := r.Weights[endpoint(n)]
				sum += w
				if want := c / 600; math.Abs(w-want)/want > 0.1 {
					t.Errorf("weight of %s = %.3f; want about its capacity share %.3f", n, w, want)
				}
			}
			if len(r.Weights) != 3 || math.Abs(sum-1) > 1e-9 {
				t.Errorf("RATE weights = %v; want 3 weights keyed by endpoint, summing to 1", r.Weights)
			}
			if !reflect.DeepEqual(rep.Weights, r.Weights) || len(rep.Nodes) != 3 || rep.NodesMissing != nil {
				t.Errorf("report weights %v, nodes %v, missing %v; want RATE's weights and 3 fresh nodes", rep.Weights, rep.Nodes, rep.NodesMissing)
			}
			if rep.Measured != tt.held(rep.Nodes) {
				t.Errorf("report measured %v; want the %s of the nodes %v", rep.Measured, tt.regulate, rep.Nodes)
			}
		})
	}
}

// TestTickRateLoopHoldsHottestNode: under a fixed imbalance (the balancer
// pinned by its share bounds) the rate loop holds the hottest node, not the
// mean, at the setpoint.
func TestTickRateLoopHoldsHottestNode(t *testing.T) {
	rg := newRig(t)
	rg.params("fleet", func(a map[string]any) {
		a["nodes"] = fleetNodes("a", "b")
		// max_share 1: no node may take more than an equal share, so a
		// 1:3 fleet stays imbalanced.
		a["balance_max_share"] = 1.0
		// Node a's plant gain at half the traffic is 0.5 point per
		// message/s: gains for that.
		a["kp"], a["ki"] = 0.5, 0.01
	})
	_, y, rep := runFleet(t, rg, fleet{cap: map[string]float64{"a": 100, "b": 300}, base: 5}, 60)
	if math.Abs(y["a"]-70) > 1 || y["b"] >= 40 {
		t.Errorf("utilizations %v; want the hottest node a held at 70 and b far below", y)
	}
	if rep.Measured != rep.Nodes["a"] {
		t.Errorf("measured %v; want node a's %v", rep.Measured, rep.Nodes["a"])
	}
}

func TestTickMissingNodeMetricKeepsWeight(t *testing.T) {
	rg := newRig(t)
	rg.params("fleet", func(a map[string]any) { a["nodes"] = fleetNodes("a", "b", "c") })
	f := fleet{cap: map[string]float64{"a": 100, "b": 200, "c": 300}, base: 5}
	r, _, _ := runFleet(t, rg, f, 10)
	before := r.Weights[endpoint("b")]

	// b's metric disappears; a's is stale (published 10 min ago).
	f.apply(rg, r)
	rg.metrics.set("fleet-b", metric.Sample{})
	rg.metrics.set("fleet-a", metric.Sample{Value: 99, Time: rg.clock.now.Add(-10 * time.Minute), Found: true})
	rep := rg.tick("fleet")
	got, err := rg.store.ReadRate(context.Background(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if got.Weights[endpoint("b")] != before {
		t.Errorf("weight of b with its metric missing = %v; want %v kept to the bit", got.Weights[endpoint("b")], before)
	}
	if !slices.Equal(rep.NodesMissing, []string{"a", "b"}) || len(rep.Nodes) != 1 {
		t.Errorf("nodes missing %v, fresh %v; want a and b missing, c fresh", rep.NodesMissing, rep.Nodes)
	}
	if rep.Stale || rep.Measured != rep.Nodes["c"] {
		t.Errorf("stale %v, measured %v; want the rate loop on the one fresh node c (%v)", rep.Stale, rep.Measured, rep.Nodes["c"])
	}
	var sum float64
	for _, w := range got.Weights {
		sum += w
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("weights %v sum to %v; want 1", got.Weights, sum)
	}

	// No node has a metric: the stale policy applies, every weight held.
	for _, n := range []string{"a", "b", "c"} {
		rg.metrics.set("fleet-"+n, metric.Sample{})
	}
	rep = rg.tick("fleet")
	held, err := rg.store.ReadRate(context.Background(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Stale || len(held.Weights) != 3 {
		t.Errorf("no node metric: stale %v, weights %v; want stale and 3 weights", rep.Stale, held.Weights)
	}
	for k, w := range got.Weights {
		// Held up to the renormalization's last few ulps.
		if math.Abs(held.Weights[k]-w) > 1e-12 {
			t.Errorf("no node metric: weight of %s = %v; want %v held", k, held.Weights[k], w)
		}
	}
}

func TestTickNodesJoinAndLeave(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	rg.params("fleet", func(a map[string]any) { a["nodes"] = fleetNodes("a", "b") })
	f := fleet{cap: map[string]float64{"a": 100, "b": 300}, base: 5}
	r, _, _ := runFleet(t, rg, f, 30)
	if w := r.Weights[endpoint("a")]; math.Abs(w-0.25) > 0.03 {
		t.Fatalf("weight of a in a 1:3 fleet = %v; want about 0.25", w)
	}

	// c joins (capacity 200): it starts at the mean weight, 1/3.
	rg.params("fleet", func(a map[string]any) { a["nodes"] = fleetNodes("a", "b", "c") })
	f.cap["c"] = 200
	f.apply(rg, r)
	rg.metrics.set("fleet-c", metric.Sample{}) // no traffic yet, no metric
	rep := rg.tick("fleet")
	r, err := rg.store.ReadRate(ctx, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Weights) != 3 || math.Abs(r.Weights[endpoint("c")]-1.0/3) > 1e-9 {
		t.Errorf("after c joined: weights %v (report %v); want 3 nodes, c at the mean weight 1/3", r.Weights, rep.Weights)
	}
	for range 40 {
		f.apply(rg, r)
		rg.tick("fleet")
		if r, err = rg.store.ReadRate(ctx, "fleet"); err != nil {
			t.Fatal(err)
		}
	}
	if mx, avg := maxAvg(f.apply(rg, r)); mx/avg > 1.02 {
		t.Errorf("40 ticks after c joined: max/avg %.3f, weights %v; want <= 1.02", mx/avg, r.Weights)
	}

	// a leaves: its share goes to the others; STATE forgets it.
	rg.params("fleet", func(a map[string]any) { a["nodes"] = fleetNodes("b", "c") })
	delete(f.cap, "a")
	f.apply(rg, r)
	rg.tick("fleet")
	if r, err = rg.store.ReadRate(ctx, "fleet"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Weights[endpoint("a")]; ok || len(r.Weights) != 2 || math.Abs(r.Weights[endpoint("b")]+r.Weights[endpoint("c")]-1) > 1e-9 {
		t.Errorf("after a left: weights %v; want b and c summing to 1", r.Weights)
	}
	st, err := rg.store.ReadState(ctx, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Balance.Nodes["a"]; ok || len(st.Balance.Nodes) != 2 {
		t.Errorf("STATE balance nodes = %v; want b and c", st.Balance.Nodes)
	}

	// Every node removed: a plain loop again, no weights, no balancer state.
	rg.params("fleet", nil)
	rg.cpu("fleet", 60, 0)
	rg.tick("fleet")
	if r, err = rg.store.ReadRate(ctx, "fleet"); err != nil || r.Weights != nil {
		t.Errorf("after nodes were removed: RATE %+v, %v; want no weights", r, err)
	}
	if st, err = rg.store.ReadState(ctx, "fleet"); err != nil || !reflect.DeepEqual(st.Balance, balance.State{}) {
		t.Errorf("after nodes were removed: STATE balance %+v, %v; want zero", st.Balance, err)
	}
}

func TestTickNodeMetricsInOneBatch(t *testing.T) {
	rg := newRig(t)
	rg.params("fleet", func(a map[string]any) { a["nodes"] = fleetNodes("a", "b", "c") })
	rg.params("plain", nil)
	for _, k := range []string{"fleet-a", "fleet-b", "fleet-c", "plain"} {
		rg.cpu(k, 50, 0)
	}
	rg.tick("fleet")
	if len(rg.metrics.calls) != 1 {
		t.Fatalf("ReadMetrics calls = %d; want 1 for both loops", len(rg.metrics.calls))
	}
	var got []string
	for _, q := range rg.metrics.calls[0] {
		got = append(got, q.Dimensions["DBInstanceIdentifier"])
	}
	if want := []string{"fleet-a", "fleet-b", "fleet-c", "plain"}; !slices.Equal(got, want) {
		t.Errorf("queries = %v; want %v (one per node, one for the plain loop)", got, want)
	}
}

func TestTickBalanceStateRoundTripsThroughJSON(t *testing.T) {
	rg := newRig(t)
	rg.params("fleet", func(a map[string]any) { a["nodes"] = fleetNodes("a", "b", "c") })
	f := fleet{cap: map[string]float64{"a": 100, "b": 200, "c": 300}, base: 5}
	runFleet(t, rg, f, 5)
	st, err := rg.store.ReadState(context.Background(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("marshal STATE: %v", err)
	}
	var back loop.State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal STATE: %v", err)
	}
	if !reflect.DeepEqual(back.Balance, st.Balance) || len(st.Balance.Nodes) != 3 {
		t.Fatalf("STATE balance after JSON = %+v; want %+v", back.Balance, st.Balance)
	}
	// Both copies continue bit for bit.
	y := map[string]float64{"a": 80, "b": 60, "c": math.NaN()}
	c1 := balance.Controller{Config: back.Params.BalanceConfig(), State: st.Balance}
	c2 := balance.Controller{Config: back.Params.BalanceConfig(), State: back.Balance}
	c1.Update(y, time.Minute)
	c2.Update(y, time.Minute)
	if !reflect.DeepEqual(c1.Weights(), c2.Weights()) {
		t.Errorf("restored balancer diverges: %v; want %v", c2.Weights(), c1.Weights())
	}
}
