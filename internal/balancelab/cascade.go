package balancelab

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"

	"github.com/sluice-dev/sluice/pkg/control"
)

// Regulated selects which utilization the rate loop holds at its setpoint.
type Regulated string

const (
	// RegulateMax holds the hottest node at the setpoint.
	RegulateMax Regulated = "max"
	// RegulateMean holds the fleet mean at the setpoint.
	RegulateMean Regulated = "mean"
)

// CascadeScenario is the rate loop (pkg/control's PI, total messages/s) and
// the balancer (node weights) on one simulated fleet, with a disturbance on
// one node. It shows which utilization the rate loop should regulate and why
// the balancer must be faster than the rate loop (docs/balance.md).
type CascadeScenario struct {
	// Capacities are the nodes' capacities, messages/s at 100 %.
	Capacities []float64
	// Base is every node's utilization with no traffic, percent.
	Base float64
	// Lag is the nodes' time constant.
	Lag time.Duration
	// Setpoint is the rate loop's utilization setpoint, percent.
	Setpoint float64
	// RateTick and BalanceTick are the two loops' periods. BalanceTick 0
	// turns the balancer off (plain round-robin).
	RateTick, BalanceTick time.Duration
	// Regulated is the utilization the rate loop holds at the setpoint.
	Regulated Regulated
	// Rate configures the rate loop's PI.
	Rate control.Config
	// Balance configures the balancer.
	Balance balance.Config
	// Disturbance adds DisturbanceSize points to the first node's base load
	// from DisturbanceAt on (a noisy neighbour, a backup, a slow disk).
	DisturbanceAt   time.Duration
	DisturbanceSize float64
	// Duration is the length of the run.
	Duration time.Duration
	// Warmup is the start-up left out of the measures (the rate loop's own
	// start-up is not the subject here).
	Warmup time.Duration
}

// DefaultCascade returns a 1:2:3 fleet of 3,000 messages/s in total, a rate
// loop at 70 % with a 60 s tick, a balancer with a 15 s tick, and +25 points
// on the smallest node from 30 min to the end of a 60 min run.
func DefaultCascade(regulated Regulated) CascadeScenario {
	bal := balance.DefaultConfig()
	return CascadeScenario{
		Capacities: []float64{500, 1000, 1500},
		Base:       5,
		Lag:        15 * time.Second,
		Setpoint:   70,
		RateTick:   60 * time.Second,
		// Balancer tick and gains: 15 s, the defaults.
		BalanceTick: 15 * time.Second,
		Regulated:   regulated,
		// Plant gain 100/3000 points per message/s, nearly static over a
		// 60 s tick: an integral step of half the error per tick, and a
		// little proportional action.
		Rate: control.Config{
			Kp: 5, Ki: 0.25, Min: 0, Max: 10000,
			AntiWindup:     control.AntiWindupConditional,
			MeasurementMin: 0, MeasurementMax: 100,
		},
		Balance:         bal,
		DisturbanceAt:   30 * time.Minute,
		DisturbanceSize: 25,
		Duration:        60 * time.Minute,
		Warmup:          10 * time.Minute,
	}
}

// CascadeResult measures one cascade run from the plant's true utilization.
type CascadeResult struct {
	// The measures below leave out the warm-up.

	// Throughput is the mean allowed rate, messages/s.
	Throughput float64 `json:"throughput"`
	// PeakMax is the highest utilization any node reached, percent.
	PeakMax float64 `json:"peak_max"`
	// SecondsOver is how long the hottest node was above setpoint + 5.
	SecondsOver float64 `json:"seconds_over"`
	// SecondsSaturated is how long the hottest node was at 100 %.
	SecondsSaturated float64 `json:"seconds_saturated"`
	// MaxAvg is max/avg at the end.
	MaxAvg float64 `json:"max_avg"`
	// Time, Rate, Max and Mean are the series (seconds, messages/s, %, %).
	Time, Rate, Max, Mean []float64 `json:"-"`
}

// RunCascade simulates s in steps of 5 s.
func RunCascade(s CascadeScenario) (CascadeResult, error) {
	const step = 5 * time.Second
	switch {
	case s.RateTick < step || s.RateTick%step != 0:
		return CascadeResult{}, fmt.Errorf("cascade rate tick %v: must be a multiple of %v", s.RateTick, step)
	case s.BalanceTick < 0 || s.BalanceTick%step != 0:
		return CascadeResult{}, fmt.Errorf("cascade balance tick %v: must be 0 or a multiple of %v", s.BalanceTick, step)
	case s.Regulated != RegulateMax && s.Regulated != RegulateMean:
		return CascadeResult{}, fmt.Errorf("cascade regulated %q: want %q or %q", s.Regulated, RegulateMax, RegulateMean)
	case s.Duration <= 0 || s.Warmup < 0 || s.Warmup >= s.Duration:
		return CascadeResult{}, fmt.Errorf("cascade duration %v, warm-up %v: want 0 <= warm-up < duration", s.Duration, s.Warmup)
	}
	if err := s.Rate.Validate(); err != nil {
		return CascadeResult{}, fmt.Errorf("cascade rate loop: %w", err)
	}
	if err := s.Balance.Validate(); err != nil {
		return CascadeResult{}, fmt.Errorf("cascade balancer: %w", err)
	}
	nodes := make([]Node, len(s.Capacities))
	weights := make(map[string]float64, len(nodes))
	for i, c := range s.Capacities {
		nodes[i] = Node{Name: fmt.Sprintf("node-%02d", i+1), Capacity: c, Base: s.Base}
		weights[nodes[i].Name] = 1 / float64(len(nodes))
	}
	f, err := NewFleet(nodes, s.Lag)
	if err != nil {
		return CascadeResult{}, err
	}
	rate := control.Controller{Config: s.Rate}
	bal := balance.Controller{Config: s.Balance}
	var r CascadeResult
	var allowed, sum float64
	var n int
	for t := time.Duration(0); t < s.Duration; t += step {
		if t == s.DisturbanceAt {
			f.nodes[nodes[0].Name] = Node{Name: nodes[0].Name, Capacity: nodes[0].Capacity, Base: s.Base + s.DisturbanceSize}
		}
		u := f.Utilization()
		if s.BalanceTick > 0 && t%s.BalanceTick == 0 {
			bal.Update(u, s.BalanceTick)
			weights = bal.Weights()
		}
		if t%s.RateTick == 0 {
			y := maxOf(u)
			if s.Regulated == RegulateMean {
				y = meanOf(u)
			}
			allowed = rate.Update(control.Input{Setpoint: s.Setpoint, Measurement: y, SamplingInterval: s.RateTick}).Rate
		}
		u = f.Step(weights, allowed, step)
		hot := maxOf(u)
		if t >= s.Warmup {
			sum += allowed
			n++
			r.PeakMax = math.Max(r.PeakMax, hot)
			if hot > s.Setpoint+5 {
				r.SecondsOver += step.Seconds()
			}
			if hot >= 99.5 {
				r.SecondsSaturated += step.Seconds()
			}
		}
		r.Time = append(r.Time, (t + step).Seconds())
		r.Rate = append(r.Rate, allowed)
		r.Max = append(r.Max, hot)
		r.Mean = append(r.Mean, meanOf(u))
	}
	if n > 0 {
		r.Throughput = sum / float64(n)
	}
	r.MaxAvg = MaxAvg(f.Utilization())
	return r, nil
}

func maxOf(u map[string]float64) float64 {
	m := math.Inf(-1)
	for _, y := range u {
		m = math.Max(m, y)
	}
	return m
}

func meanOf(u map[string]float64) float64 {
	var s float64
	for _, name := range slices.Sorted(maps.Keys(u)) {
		s += u[name]
	}
	return s / float64(len(u))
}

// CascadeVariant is one named cascade configuration.
type CascadeVariant struct {
	Name     string          `json:"name"`
	Scenario CascadeScenario `json:"-"`
}

// CascadeVariants returns the comparisons of docs/balance.md: the rate loop
// on the hottest node or on the mean, with the balancer four times faster
// than the rate loop, as fast, four times slower, or off (round-robin).
func CascadeVariants() []CascadeVariant {
	var v []CascadeVariant
	for _, reg := range []Regulated{RegulateMax, RegulateMean} {
		for _, b := range []struct {
			name string
			tick time.Duration
		}{
			{"balancer 15 s", 15 * time.Second},
			{"balancer 60 s", 60 * time.Second},
			{"balancer 240 s", 240 * time.Second},
			{"round-robin", 0},
		} {
			s := DefaultCascade(reg)
			s.BalanceTick = b.tick
			if b.tick > 0 {
				// The same gain per tick: only the time scale changes.
				s.Balance.IntegralGain = balance.DefaultConfig().IntegralGain * 15 / b.tick.Seconds()
			}
			v = append(v, CascadeVariant{Name: fmt.Sprintf("rate on %s, %s", reg, b.name), Scenario: s})
		}
	}
	return v
}
