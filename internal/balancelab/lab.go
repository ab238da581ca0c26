// Package balancelab is the lab of load balancing (`sluice lab balance`):
// simulated fleets of nodes of different capacities, balanced by pkg/balance's
// per-node PI weights and by round-robin from the same start with the same
// load, and the cascade of the rate loop over the balancer (which
// utilization the loop holds: the hottest node's or the fleet's mean).
package balancelab

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
)

// Scenario is one run of the balancing experiment behind `sluice lab
// balance`: a fleet of nodes of different capacities under a total load,
// balanced by each strategy from the same start (the steady state of plain
// round-robin) with the same load sequence.
type Scenario struct {
	// Capacities are the nodes' capacities (relative; only ratios matter).
	Capacities []float64
	// Base is every node's utilization with no traffic, percent.
	Base float64
	// Load is the total load as a fraction of the fleet's capacity: 0.4
	// puts a perfectly balanced fleet at Base + 40 %.
	Load float64
	// Jitter is the load's relative random change per tick (uniform in
	// [-Jitter, +Jitter]), the same for every strategy.
	Jitter float64
	// Noise is the standard deviation of the measurement noise, points.
	Noise float64
	// Ticks is the number of controller ticks.
	Ticks int
	// Tick is the controller period.
	Tick time.Duration
	// Lag is the nodes' time constant.
	Lag time.Duration
	// Delay is how many ticks old the metric is when the controller reads it.
	Delay int
	// Seed seeds the load jitter and the measurement noise.
	Seed uint64
	// Config configures the PI balancer.
	Config balance.Config
}

// DefaultScenario returns the lab's defaults for the given capacities.
func DefaultScenario(capacities []float64) Scenario {
	return Scenario{
		Capacities: capacities,
		Base:       5,
		Load:       0.4,
		Jitter:     0.05,
		Ticks:      60,
		Tick:       15 * time.Second,
		Lag:        15 * time.Second,
		Seed:       1,
		Config:     balance.DefaultConfig(),
	}
}

// Validate reports whether s can run, with a reason a person can act on.
func (s Scenario) Validate() error {
	switch {
	case len(s.Capacities) < 2:
		return fmt.Errorf("balance scenario: %d nodes: need at least 2", len(s.Capacities))
	case !(s.Base >= 0) || s.Base >= 100:
		return fmt.Errorf("balance scenario base %v: must be in [0, 100)", s.Base)
	case !(s.Load > 0) || s.Load > 10:
		return fmt.Errorf("balance scenario load %v: must be in (0, 10] (a fraction of the fleet's capacity)", s.Load)
	case !(s.Jitter >= 0) || s.Jitter >= 1:
		return fmt.Errorf("balance scenario jitter %v: must be in [0, 1)", s.Jitter)
	case !(s.Noise >= 0) || math.IsInf(s.Noise, 0):
		return fmt.Errorf("balance scenario noise %v: must be a finite number >= 0", s.Noise)
	case s.Ticks < 1:
		return fmt.Errorf("balance scenario ticks %d: must be at least 1", s.Ticks)
	case s.Tick <= 0:
		return fmt.Errorf("balance scenario tick %v: must be positive", s.Tick)
	case s.Lag < 0:
		return fmt.Errorf("balance scenario lag %v: must not be negative", s.Lag)
	case s.Delay < 0:
		return fmt.Errorf("balance scenario delay %d: must not be negative", s.Delay)
	}
	for i, c := range s.Capacities {
		if !(c > 0) || math.IsInf(c, 0) {
			return fmt.Errorf("balance scenario capacity %d (%v): must be a finite number > 0", i+1, c)
		}
	}
	return s.Config.Validate()
}

// Outcome is what one strategy achieved.
type Outcome struct {
	// MaxAvg is max/avg utilization at the last tick.
	MaxAvg float64 `json:"max_avg"`
	// TicksTo105 is the first tick from which max/avg stays at or below
	// 1.05 to the end, or nil if it is above 1.05 at the end.
	TicksTo105 *int `json:"ticks_to_1_05"`
	// Series is max/avg after each tick (index 0 is the start).
	Series []float64 `json:"-"`
	// Weights are the final shares by node.
	Weights map[string]float64 `json:"-"`
	// Utilization and Shares are each node's utilization and traffic share
	// after each tick (index 0 is the start), for plots.
	Utilization map[string][]float64 `json:"-"`
	Shares      map[string][]float64 `json:"-"`
}

// Result compares the strategies on one scenario.
type Result struct {
	RoundRobin  Outcome `json:"round_robin"`
	LeastLoaded Outcome `json:"least_loaded"`
	PID         Outcome `json:"pid"`
}

// strategy turns measured utilizations into traffic shares.
type strategy func(measured map[string]float64) map[string]float64

// Run runs the scenario with every strategy.
func Run(s Scenario) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	nodes := make([]Node, len(s.Capacities))
	var capacity float64
	for i, c := range s.Capacities {
		nodes[i] = Node{Name: fmt.Sprintf("node-%02d", i+1), Capacity: c, Base: s.Base}
		capacity += c
	}
	// One load and noise sequence for all strategies.
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	loads := make([]float64, s.Ticks+1)
	noise := make([][]float64, s.Ticks+1)
	for t := range loads {
		loads[t] = s.Load * capacity * (1 + s.Jitter*(2*rng.Float64()-1))
		noise[t] = make([]float64, len(nodes))
		for i := range nodes {
			noise[t][i] = s.Noise * rng.NormFloat64()
		}
	}
	equal := make(map[string]float64, len(nodes))
	for _, n := range nodes {
		equal[n.Name] = 1 / float64(len(nodes))
	}

	run := func(pick strategy) (Outcome, error) {
		f, err := NewFleet(nodes, s.Lag)
		if err != nil {
			return Outcome{}, err
		}
		f.Settle(equal, loads[0])
		history := []map[string]float64{f.Utilization()}
		series := []float64{MaxAvg(f.Utilization())}
		util := map[string][]float64{}
		share := map[string][]float64{}
		for _, n := range nodes {
			util[n.Name] = []float64{f.Utilization()[n.Name]}
			share[n.Name] = []float64{equal[n.Name]}
		}
		var shares map[string]float64
		for t := 1; t <= s.Ticks; t++ {
			old := history[max(0, len(history)-1-s.Delay)]
			measured := make(map[string]float64, len(nodes))
			for i, n := range nodes {
				measured[n.Name] = math.Max(0, old[n.Name]+noise[t][i])
			}
			shares = pick(measured)
			u := f.Step(shares, loads[t], s.Tick)
			history = append(history, u)
			series = append(series, MaxAvg(u))
			for _, n := range nodes {
				util[n.Name] = append(util[n.Name], u[n.Name])
				share[n.Name] = append(share[n.Name], shares[n.Name])
			}
		}
		o := outcome(series, shares)
		o.Utilization, o.Shares = util, share
		return o, nil
	}

	var r Result
	var err error
	if r.RoundRobin, err = run(func(map[string]float64) map[string]float64 { return equal }); err != nil {
		return Result{}, err
	}
	if r.LeastLoaded, err = run(leastLoaded); err != nil {
		return Result{}, err
	}
	c := balance.Controller{Config: s.Config}
	if r.PID, err = run(func(measured map[string]float64) map[string]float64 {
		c.Update(measured, s.Tick)
		return c.Weights()
	}); err != nil {
		return Result{}, err
	}
	return r, nil
}

// leastLoaded sends the whole next tick's traffic to the node whose measured
// utilization is lowest: the greedy rule that herds.
func leastLoaded(measured map[string]float64) map[string]float64 {
	best, low := "", math.Inf(1)
	for name, y := range measured {
		if y < low || (y == low && name < best) {
			best, low = name, y
		}
	}
	return map[string]float64{best: 1}
}

// outcome summarizes a max/avg series.
func outcome(series []float64, weights map[string]float64) Outcome {
	o := Outcome{MaxAvg: series[len(series)-1], Series: series, Weights: weights}
	if o.MaxAvg <= 1.05 {
		t := len(series) - 1
		for t > 0 && series[t-1] <= 1.05 {
			t--
		}
		o.TicksTo105 = &t
	}
	return o
}

// RandomCapacities returns n capacities drawn uniformly from [1, 10], rounded
// to one decimal, from seed.
func RandomCapacities(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0xcafe))
	c := make([]float64, n)
	for i := range c {
		c[i] = math.Round(10*(1+9*rng.Float64())) / 10
	}
	return c
}
