package balancelab

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
)

const tick = 15 * time.Second

// closeLoop runs the controller against the fleet for n ticks at the given
// load (a fraction of the fleet's capacity) and returns max/avg at the end.
func closeLoop(t *testing.T, c *balance.Controller, f *Fleet, load float64, n int) float64 {
	t.Helper()
	for i := 0; i < n; i++ {
		c.Update(f.Utilization(), tick)
		f.Step(c.Weights(), load*f.Capacity(), tick)
	}
	return MaxAvg(f.Utilization())
}

func newFleet(t *testing.T, capacities ...float64) *Fleet {
	t.Helper()
	var nodes []Node
	for i, c := range capacities {
		nodes = append(nodes, Node{Name: string(rune('a' + i)), Capacity: c, Base: 5})
	}
	f, err := NewFleet(nodes, tick)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHeterogeneousFleets(t *testing.T) {
	tests := []struct {
		name       string
		capacities []float64
	}{
		{"1:2:3", []float64{1, 2, 3}},
		{"1:1:4", []float64{1, 1, 4}},
		{"1:2:3:4:5", []float64{1, 2, 3, 4, 5}},
		{"1:10", []float64{1, 10}},
		{"10 random seed 1", RandomCapacities(10, 1)},
		{"10 random seed 2", RandomCapacities(10, 2)},
		{"10 random seed 3", RandomCapacities(10, 3)},
		{"20 random seed 4", RandomCapacities(20, 4)},
		{"1:100", []float64{1, 100}},
		{"nine 1 and one 10", []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultScenario(tt.capacities)
			s.Ticks = 40
			r, err := Run(s)
			if err != nil {
				t.Fatal(err)
			}
			if r.PID.MaxAvg > 1.02 {
				t.Errorf("pid max/avg at the end = %.4f; want <= 1.02", r.PID.MaxAvg)
			}
			if r.PID.TicksTo105 == nil || *r.PID.TicksTo105 > 20 {
				t.Errorf("pid ticks to 1.05 = %v; want <= 20 (series %.3f)", r.PID.TicksTo105, r.PID.Series)
			}
			if r.RoundRobin.MaxAvg < 1.3 && tt.name != "nine 1 and one 10" {
				t.Errorf("round-robin max/avg = %.4f; want >= 1.3", r.RoundRobin.MaxAvg)
			}
			if got := sumWeights(r.PID.Weights); math.Abs(got-1) > 1e-9 {
				t.Errorf("pid weights sum to %v; want 1", got)
			}
		})
	}
}

func TestStaleMetric(t *testing.T) {
	// The default gains stay stable when the controller reads a metric two
	// ticks old (a CloudWatch-like pipeline at a short tick).
	for _, c := range [][]float64{{1, 2, 3}, {1, 10}, RandomCapacities(10, 2)} {
		s := DefaultScenario(c)
		s.Delay = 2
		r, err := Run(s)
		if err != nil {
			t.Fatal(err)
		}
		if r.PID.MaxAvg > 1.02 || r.PID.TicksTo105 == nil || *r.PID.TicksTo105 > 30 {
			t.Errorf("fleet %v, metric 2 ticks old: max/avg %.4f, ticks to 1.05 %v; want <= 1.02 within 30 ticks",
				c, r.PID.MaxAvg, r.PID.TicksTo105)
		}
	}
}

func TestWeightsFollowCapacity(t *testing.T) {
	// With equal base loads, equal utilization means shares proportional
	// to capacity: 1/6, 2/6, 3/6.
	f := newFleet(t, 1, 2, 3)
	c := balance.Controller{Config: balance.DefaultConfig()}
	if got := closeLoop(t, &c, f, 0.4, 60); got > 1.001 {
		t.Fatalf("max/avg = %v; want <= 1.001", got)
	}
	w := c.Weights()
	for name, want := range map[string]float64{"a": 1.0 / 6, "b": 2.0 / 6, "c": 3.0 / 6} {
		if math.Abs(w[name]-want) > 0.002 {
			t.Errorf("weight %s = %.4f; want %.4f", name, w[name], want)
		}
	}
}

func TestNodeJoins(t *testing.T) {
	f := newFleet(t, 1, 2, 3)
	c := balance.Controller{Config: balance.DefaultConfig()}
	closeLoop(t, &c, f, 0.4, 40)
	before := c.Weights()

	if err := f.Add(Node{Name: "d", Capacity: 6, Base: 5}); err != nil {
		t.Fatal(err)
	}
	u := f.Utilization() // d at its base: far below the mean
	c.Update(u, 0)       // dt 0: no integral step, only membership
	w := c.Weights()
	if math.Abs(w["d"]-0.25) > 1e-12 {
		t.Errorf("joining node weight = %v; want the mean weight 0.25", w["d"])
	}
	for _, name := range []string{"a", "b", "c"} {
		if want := before[name] * 0.75; math.Abs(w[name]-want) > 1e-12 {
			t.Errorf("weight %s after join = %v; want %v (scaled in proportion)", name, w[name], want)
		}
	}
	if got := closeLoop(t, &c, f, 0.4, 40); got > 1.02 {
		t.Errorf("max/avg after join = %.4f; want <= 1.02", got)
	}
	if w := c.Weights(); math.Abs(w["d"]-0.5) > 0.01 {
		t.Errorf("joined node (half the capacity) weight = %.4f; want about 0.5", w["d"])
	}
}

func TestNodeLeaves(t *testing.T) {
	f := newFleet(t, 1, 2, 3, 4)
	c := balance.Controller{Config: balance.DefaultConfig()}
	closeLoop(t, &c, f, 0.4, 40)
	before := c.Weights()

	f.Remove("d")
	u := f.Utilization()
	c.Update(u, 0)
	w := c.Weights()
	if _, ok := w["d"]; ok || len(w) != 3 {
		t.Fatalf("weights after leave = %v; want a, b, c only", w)
	}
	rest := before["a"] + before["b"] + before["c"]
	for _, name := range []string{"a", "b", "c"} {
		if want := before[name] / rest; math.Abs(w[name]-want) > 1e-12 {
			t.Errorf("weight %s after leave = %v; want %v", name, w[name], want)
		}
	}
	// The load is now spread over less capacity: 0.4 of 10 on 6.
	if got := closeLoop(t, &c, f, 0.4*10/6, 40); got > 1.02 {
		t.Errorf("max/avg after leave = %.4f; want <= 1.02", got)
	}
}

func TestMissingMetric(t *testing.T) {
	for _, missing := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		f := newFleet(t, 1, 2, 3)
		c := balance.Controller{Config: balance.DefaultConfig()}
		closeLoop(t, &c, f, 0.4, 3) // far from balanced: everyone still moving
		held := c.Weights()["c"]
		for i := 0; i < 10; i++ {
			u := f.Utilization()
			u["c"] = missing
			c.Update(u, tick)
			if got := c.Weights()["c"]; got != held {
				t.Fatalf("metric %v, tick %d: weight of c = %v; want it held at %v", missing, i, got, held)
			}
			if got := sumWeights(c.Weights()); math.Abs(got-1) > 1e-9 {
				t.Fatalf("metric %v: weights sum to %v; want 1", missing, got)
			}
			f.Step(c.Weights(), 0.4*f.Capacity(), tick)
		}
		if n := c.State.Nodes["c"]; n.Primed || n.Missing != 10 {
			t.Errorf("metric %v: node state = %+v; want not primed, 10 missing", missing, n)
		}
		// The metric comes back: no proportional kick, only the integral step.
		u := f.Utilization()
		mean := (u["a"] + u["b"] + u["c"]) / 3
		e := (mean - u["c"]) / mean
		c.Update(u, tick)
		w := c.State.Nodes["c"].Weight
		if !c.State.Nodes["c"].Primed {
			t.Errorf("metric %v: node c not primed after its metric came back", missing)
		}
		if e > 0 && w <= held || e < 0 && w >= held {
			t.Errorf("metric %v: weight of c moved from %v to %v against its error %v", missing, held, w, e)
		}
		if got := closeLoop(t, &c, f, 0.4, 40); got > 1.02 {
			t.Errorf("metric %v: max/avg after recovery = %.4f; want <= 1.02", missing, got)
		}
	}
}

func TestBoundsAndAntiWindup(t *testing.T) {
	// Node b is ten times a's capacity but may take at most 1.2 equal
	// shares (0.6): it stays pinned at the bound, below the mean, for as
	// long as the imbalance lasts.
	cfg := balance.DefaultConfig()
	cfg.MaxShare = 1.2
	c := balance.Controller{Config: cfg}
	f := newFleet(t, 1, 10)
	closeLoop(t, &c, f, 0.3, 30)
	if got := c.Weights()["b"]; math.Abs(got-0.6) > 1e-12 {
		t.Fatalf("weight of b = %v; want pinned at 0.6", got)
	}
	// Now b becomes the hot node: its weight leaves the bound at once, with
	// no integral wound up behind it.
	c.Update(map[string]float64{"a": 20, "b": 60}, tick)
	if got := c.Weights()["b"]; got >= 0.6 {
		t.Errorf("weight of b after its error turned = %v; want below 0.6 at the first tick", got)
	}
}

func TestStateRoundTripsThroughJSON(t *testing.T) {
	f := newFleet(t, 1, 2, 3, 7)
	live := balance.Controller{Config: balance.DefaultConfig()}
	closeLoop(t, &live, f, 0.4, 5)

	b, err := json.Marshal(live.State)
	if err != nil {
		t.Fatal(err)
	}
	var restored balance.Controller
	restored.Config = live.Config
	if err := json.Unmarshal(b, &restored.State); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.State, live.State) {
		t.Fatalf("state after JSON = %+v; want %+v", restored.State, live.State)
	}
	// Both continue bit for bit alike, as a Lambda that saved and reloaded
	// its state would.
	for i := 0; i < 10; i++ {
		u := f.Utilization()
		live.Update(u, tick)
		restored.Update(u, tick)
		f.Step(live.Weights(), 0.4*f.Capacity(), tick)
	}
	if !reflect.DeepEqual(restored.State, live.State) {
		t.Errorf("restored state diverged: %+v; want %+v", restored.State, live.State)
	}
	var cfg balance.Config
	cb, _ := json.Marshal(live.Config)
	if err := json.Unmarshal(cb, &cfg); err != nil || cfg != live.Config {
		t.Errorf("config after JSON = %+v, %v; want %+v", cfg, err, live.Config)
	}
}

func sumWeights(w map[string]float64) float64 {
	var s float64
	for _, v := range w {
		s += v
	}
	return s
}
