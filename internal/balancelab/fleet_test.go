package balancelab

import (
	"math"
	"testing"
	"time"
)

func TestFleetSaturatesAt100(t *testing.T) {
	f, err := NewFleet([]Node{{Name: "a", Capacity: 1, Base: 10}, {Name: "b", Capacity: 4}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 4 units of work per second, all to a: four times its capacity.
	for i := 0; i < 100; i++ {
		u := f.Step(map[string]float64{"a": 1}, 4, time.Second)
		if u["a"] != 100 || u["b"] != 0 {
			t.Fatalf("tick %d: utilization = %v; want a saturated at 100, b idle at 0", i, u)
		}
	}
	u := f.Step(map[string]float64{"a": 0.1, "b": 0.9}, 2, time.Second)
	if want := 10 + 100*0.2; math.Abs(u["a"]-want) > 1e-12 {
		t.Errorf("utilization of a = %v; want %v", u["a"], want)
	}
	if want := 100 * 1.8 / 4; math.Abs(u["b"]-want) > 1e-12 {
		t.Errorf("utilization of b = %v; want %v", u["b"], want)
	}
}

func TestFleetLag(t *testing.T) {
	f, err := NewFleet([]Node{{Name: "a", Capacity: 1}}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A step to 50 %: after one time constant, 1 - 1/e of the way.
	u := f.Step(map[string]float64{"a": 1}, 0.5, 10*time.Second)
	if want := 50 * (1 - math.Exp(-1)); math.Abs(u["a"]-want) > 1e-9 {
		t.Errorf("utilization after one lag = %v; want %v", u["a"], want)
	}
}

func TestNewFleetRejectsBadNodes(t *testing.T) {
	for _, nodes := range [][]Node{
		{{Name: "", Capacity: 1}},
		{{Name: "a", Capacity: 0}},
		{{Name: "a", Capacity: math.Inf(1)}},
		{{Name: "a", Capacity: 1, Base: 100}},
		{{Name: "a", Capacity: 1}, {Name: "a", Capacity: 2}},
	} {
		if _, err := NewFleet(nodes, 0); err == nil {
			t.Errorf("NewFleet(%v) = nil error; want an error", nodes)
		}
	}
	if _, err := NewFleet(nil, -time.Second); err == nil {
		t.Error("NewFleet with a negative lag = nil error; want an error")
	}
}

func TestMaxAvg(t *testing.T) {
	tests := []struct {
		u    map[string]float64
		want float64
	}{
		{map[string]float64{"a": 50, "b": 50}, 1},
		{map[string]float64{"a": 90, "b": 30}, 1.5},
		{map[string]float64{"a": 0, "b": 0}, 0},
		{nil, 0},
	}
	for _, tt := range tests {
		if got := MaxAvg(tt.u); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("MaxAvg(%v) = %v; want %v", tt.u, got, tt.want)
		}
	}
}

func TestRunIsDeterministicAndValidates(t *testing.T) {
	s := DefaultScenario([]float64{1, 2, 3})
	s.Noise = 0.5
	a, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(s)
	if a.PID.MaxAvg != b.PID.MaxAvg || a.RoundRobin.MaxAvg != b.RoundRobin.MaxAvg {
		t.Errorf("two runs with seed %d differ: %v vs %v", s.Seed, a.PID.MaxAvg, b.PID.MaxAvg)
	}
	if len(a.PID.Series) != s.Ticks+1 {
		t.Errorf("len(series) = %d; want %d", len(a.PID.Series), s.Ticks+1)
	}
	bad := []func(*Scenario){
		func(s *Scenario) { s.Capacities = []float64{1} },
		func(s *Scenario) { s.Capacities = []float64{1, -2} },
		func(s *Scenario) { s.Load = 0 },
		func(s *Scenario) { s.Ticks = 0 },
		func(s *Scenario) { s.Tick = 0 },
		func(s *Scenario) { s.Base = 100 },
		func(s *Scenario) { s.Config.IntegralGain = 0 },
	}
	for i, edit := range bad {
		s := DefaultScenario([]float64{1, 2})
		edit(&s)
		if _, err := Run(s); err == nil {
			t.Errorf("bad scenario %d: Run = nil error; want an error", i)
		}
	}
}

func TestOutcomeTicksTo105(t *testing.T) {
	tests := []struct {
		series []float64
		want   int // -1 for nil
	}{
		{[]float64{1.5, 1.2, 1.04, 1.06, 1.03, 1.01}, 4},
		{[]float64{1.5, 1.04, 1.03}, 1},
		{[]float64{1.01, 1.0}, 0},
		{[]float64{1.5, 1.04, 1.2}, -1},
	}
	for _, tt := range tests {
		o := outcome(tt.series, nil)
		got := -1
		if o.TicksTo105 != nil {
			got = *o.TicksTo105
		}
		if got != tt.want {
			t.Errorf("ticks to 1.05 of %v = %d; want %d", tt.series, got, tt.want)
		}
	}
}
