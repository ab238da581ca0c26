package lab

import (
	"math"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
)

// input turns a tick's observation into a controller input: the newest
// datapoint with its age and period (NaN when none was published) and the
// rate the consumers really processed since the previous tick.
func input(o sim.Observation) control.Input {
	in := control.Input{Setpoint: o.Setpoint, Measurement: math.NaN(), SamplingInterval: o.Interval,
		ActualRate: o.Processed, ActualKnown: o.Now > 0}
	if o.OK {
		in.Measurement = o.Datapoint.Value
		in.MeasurementAge = o.Age()
		in.MeasurementPeriod = o.Datapoint.Period
	}
	return in
}

// pidPolicy runs a control.Controller in the lab.
type pidPolicy struct{ c control.Controller }

func (p *pidPolicy) Rate(o sim.Observation) float64 { return p.c.Update(input(o)).Rate }

// smithPolicy runs a SmithPredictor in the lab.
type smithPolicy struct{ c SmithPredictor }

func (p *smithPolicy) Rate(o sim.Observation) float64 { return p.c.Update(input(o)).Rate }

// fixedPolicy is today's practice: one rate, chosen to hold the setpoint on
// the nominal plant without disturbance.
type fixedPolicy struct{ rate float64 }

func (p fixedPolicy) Rate(sim.Observation) float64 { return p.rate }

// aimdPolicy is additive increase, multiplicative decrease on CPU above the
// setpoint, like adaptive concurrency limiters: +Increase per tick while the
// newest datapoint is at or below the setpoint, x Decrease when above. It
// acts on new datapoints only.
type aimdPolicy struct {
	increase, decrease float64
	min, max           float64
	rate               float64
	lastEnd            float64
	started            bool
}

func (p *aimdPolicy) Rate(o sim.Observation) float64 {
	if !p.started {
		p.started, p.rate, p.lastEnd = true, p.min, math.Inf(-1)
	}
	if !o.OK {
		return p.rate
	}
	end := o.Datapoint.End().Seconds()
	if end <= p.lastEnd {
		return p.rate
	}
	p.lastEnd = end
	if o.Datapoint.Value > o.Setpoint {
		p.rate *= p.decrease
	} else {
		p.rate += p.increase
	}
	p.rate = math.Max(p.min, math.Min(p.max, p.rate))
	return p.rate
}
