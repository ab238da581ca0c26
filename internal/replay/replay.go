// Package replay compares two controllers' gains on a loop's recorded
// history by a counterfactual replay: the plant is the model identified from
// the history, the disturbance is what the record shows beyond the model's
// response to the rate the consumers took (measured − model), and each
// controller runs in closed loop on that model with that disturbance and the
// recorded setpoint trajectory. A shadow loop sees the live loop's
// datapoints, not those its own rate would have caused, so its recorded IAE
// says nothing; the replay says what its rate would have done.
//
// The replay of the live gains must reproduce the record (Fit): that checks
// the model, the disturbance estimate and the controller's replay together.
package replay

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// Trace is a loop's record, one sample per tick: at T[i] (seconds) the
// setpoint was Setpoint[i], the newest datapoint Measured[i] (NaN when
// missing or stale), the controller wrote Rate[i], and the consumers had
// taken Consumed[i] messages/s since the previous tick (NaN when unknown).
type Trace struct {
	T, Setpoint, Measured, Rate, Consumed []float64
}

// Len is the number of ticks.
func (tr Trace) Len() int { return len(tr.T) }

// Plant is the identified plant and the measurement's timing.
type Plant struct {
	Model control.FOPDT
	// MetricPeriod is a datapoint's averaging period; PipelineDelay how long
	// before the tick the middle of that period lies (ident.ClosedLoopOptions).
	MetricPeriod, PipelineDelay time.Duration
}

// demandTolerance is how far below the allowed rate the consumers' rate
// must fall for the tick to count as limited by demand (an empty queue):
// the replayed rate is then capped at what the consumers took.
const demandTolerance = 0.05

// Run is one controller's replayed trajectory and its figures.
type Run struct {
	Measured []float64 `json:"-"`
	Rate     []float64 `json:"-"`
	// IAE is the integral of |setpoint − measured| over the ticks,
	// point-seconds; Overshoot the largest excess of the measured signal
	// over the setpoint, points; RateTV the total variation of the rate
	// (the sum of its changes), messages/s.
	IAE       float64 `json:"iae"`
	Overshoot float64 `json:"max_overshoot"`
	RateTV    float64 `json:"rate_total_variation"`
}

// input returns the rate acting on (T[i-1], T[i]] when the controller asked
// for rate: capped at what the consumers took when the record says demand
// limited them.
func (tr Trace) input(i int, rate float64) float64 {
	c := tr.Consumed[i]
	if i > 0 && !math.IsNaN(c) && !math.IsNaN(tr.Rate[i-1]) && c < tr.Rate[i-1]*(1-demandTolerance) {
		return math.Min(rate, c)
	}
	return rate
}

// firstInput is the rate taken to have held before the record: the one
// that holds the model at the first datapoint, else the first known
// consumed rate, else the first rate.
func (tr Trace) firstInput(m control.FOPDT) float64 {
	if y := tr.Measured[0]; !math.IsNaN(y) && m.Gain > 0 {
		return math.Max(0, m.Input(y))
	}
	for _, c := range tr.Consumed {
		if !math.IsNaN(c) {
			return c
		}
	}
	return tr.Rate[0]
}

// plantSim is the identified model driven tick by tick.
type plantSim struct {
	p    Plant
	segs []control.Segment
}

func newPlantSim(p Plant, t0, u0 float64) *plantSim {
	return &plantSim{p: p, segs: []control.Segment{{At: sec(t0) - 24*time.Hour, Value: u0}}}
}

// apply records that u acted from t (seconds) on.
func (s *plantSim) apply(t, u float64) {
	if s.segs[len(s.segs)-1].Value != u {
		s.segs = append(s.segs, control.Segment{At: sec(t), Value: u})
	}
}

// datapoint is the model's datapoint at tick t (seconds): its response
// averaged over the period whose middle lies PipelineDelay before t.
func (s *plantSim) datapoint(t float64) float64 {
	m := s.p.Model
	mid := sec(t) - s.p.PipelineDelay
	from, to := mid-s.p.MetricPeriod/2, mid+s.p.MetricPeriod/2
	s.prune(from - m.DeadTime - 20*m.Tau)
	return m.Base + m.Gain*m.Expected(s.segs, from, to)
}

// prune drops the segments that ended before cutoff: the lag forgot them.
func (s *plantSim) prune(cutoff time.Duration) {
	i := 0
	for i+1 < len(s.segs) && s.segs[i+1].At <= cutoff {
		i++
	}
	s.segs = s.segs[i:]
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Disturbance returns, per tick, what the record shows beyond the model's
// response to the rate the consumers took: measured − model (NaN where the
// datapoint is missing).
func Disturbance(tr Trace, p Plant) []float64 {
	d := make([]float64, tr.Len())
	if tr.Len() == 0 {
		return d
	}
	last := tr.firstInput(p.Model)
	ps := newPlantSim(p, tr.T[0], last)
	for i := range d {
		if i > 0 {
			if u := tr.Consumed[i]; !math.IsNaN(u) {
				last = u
			} else if r := tr.Rate[i-1]; !math.IsNaN(r) {
				last = r
			}
			ps.apply(tr.T[i-1], last)
		}
		d[i] = tr.Measured[i] - ps.datapoint(tr.T[i])
	}
	return d
}

// WarmUp is how many ticks a replay follows the recorded rate before it
// runs free: a record starts in the middle of a run, and every controller
// starts bumplessly from the same recorded rates. The figures count the
// ticks after it.
const WarmUp = 1

// Simulate runs the controller cfg in closed loop on the model with the
// disturbance d and the recorded setpoints. For the first WarmUp ticks its
// output is the recorded rate (its integrator takes up the difference, and
// Controller.Override), then it runs free.
func Simulate(tr Trace, d []float64, cfg control.Config, p Plant) (Run, error) {
	if err := cfg.Validate(); err != nil {
		return Run{}, fmt.Errorf("controller: %w", err)
	}
	n := tr.Len()
	if n <= 2*WarmUp || len(d) != n {
		return Run{}, fmt.Errorf("replay: %d ticks and %d disturbances: need more than %d of each", n, len(d), 2*WarmUp)
	}
	c := control.Controller{Config: cfg}
	ps := newPlantSim(p, tr.T[0], tr.firstInput(p.Model))
	run := Run{Measured: make([]float64, n), Rate: make([]float64, n)}
	age := p.PipelineDelay - p.MetricPeriod/2
	for i := range n {
		in := control.Input{Setpoint: tr.Setpoint[i], MeasurementAge: age, MeasurementPeriod: p.MetricPeriod, Measurement: math.NaN()}
		if i > 0 {
			u := tr.input(i, run.Rate[i-1])
			ps.apply(tr.T[i-1], u)
			in.SamplingInterval = sec(tr.T[i] - tr.T[i-1])
			in.ActualRate, in.ActualKnown = u, true
		}
		if y := ps.datapoint(tr.T[i]) + d[i]; !math.IsNaN(y) {
			in.Measurement = math.Min(100, math.Max(0, y))
		}
		run.Measured[i] = in.Measurement
		run.Rate[i] = c.Update(in).Rate
		if i < WarmUp && !math.IsNaN(tr.Rate[i]) {
			// Bumpless transfer: the integrator takes up the difference.
			c.State.Integral += tr.Rate[i] - run.Rate[i]
			c.Override(tr.Rate[i])
			run.Rate[i] = c.State.Output
		}
	}
	run.score(tr)
	return run, nil
}

// score computes the run's IAE, overshoot and rate variation.
func (r *Run) score(tr Trace) {
	for i := WarmUp; i < tr.Len(); i++ {
		r.RateTV += math.Abs(r.Rate[i] - r.Rate[i-1])
		if e := r.Measured[i] - tr.Setpoint[i]; !math.IsNaN(e) {
			r.IAE += math.Abs(e) * (tr.T[i] - tr.T[i-1])
			r.Overshoot = math.Max(r.Overshoot, e)
		}
	}
}

// Fit is how well a replay reproduces the record, as the normalized fit of
// system identification (100 × (1 − |sim − rec| / |rec − mean(rec)|),
// percent; 100 is exact, 0 no better than the mean), for the measured
// signal and the rate.
type Fit struct {
	Measured float64 `json:"measured_pct"`
	Rate     float64 `json:"rate_pct"`
}

// FitOf compares the replay r with the record after the warm-up.
func FitOf(tr Trace, r Run) Fit {
	return Fit{Measured: nrmseFit(tr.Measured[WarmUp:], r.Measured[WarmUp:]), Rate: nrmseFit(tr.Rate[WarmUp:], r.Rate[WarmUp:])}
}

func nrmseFit(rec, sim []float64) float64 {
	var mean float64
	var n int
	for i, v := range rec {
		if !math.IsNaN(v) && !math.IsNaN(sim[i]) {
			mean += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	mean /= float64(n)
	var num, den float64
	for i, v := range rec {
		if !math.IsNaN(v) && !math.IsNaN(sim[i]) {
			num += (sim[i] - v) * (sim[i] - v)
			den += (v - mean) * (v - mean)
		}
	}
	if den == 0 {
		return math.NaN()
	}
	return 100 * (1 - math.Sqrt(num/den))
}
