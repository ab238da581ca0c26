package demo

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/drift"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// FirstDrift runs the demo's production loop on s, tuned by Tune, and
// returns the virtual time since the run's start of the first tick whose
// report says model_drift, or -1 when no tick does.
func FirstDrift(ctx context.Context, s sim.Scenario) (time.Duration, error) {
	r, err := driftRun(ctx, s)
	return r.first, err
}

// driftResult is what driftRun saw: the first tick saying model_drift (-1:
// none) with its report, the rate of each tick by its virtual time since
// the start, and the largest dead-time evidence before the first verdict.
type driftResult struct {
	first  time.Duration
	report loop.Report // of the first tick saying model_drift
	last   loop.Report // of the run's last tick
	rates  map[time.Duration]float64
	maxDT  float64
}

// driftRun runs the demo's production loop on s, tuned by Tune.
func driftRun(ctx context.Context, s sim.Scenario) (driftResult, error) {
	ctrl, _, err := Tune(s)
	if err != nil {
		return driftResult{}, err
	}
	res := driftResult{first: -1, rates: map[time.Duration]float64{}}
	cfg := Config{Scenario: s, Params: DefaultParams(s, ctrl), BatchSize: 10, NoSeries: true, Start: epoch}
	cfg.OnTick = func(tk Tick) {
		for _, r := range tk.Reports {
			if r.ModelDrift && res.first < 0 {
				res.first, res.report = tk.Now.Sub(epoch), r
			}
			if res.first < 0 {
				res.maxDT = max(res.maxDT, r.DriftDeadTimeEvidence)
			}
			res.rates[tk.Now.Sub(epoch)] = r.Rate
			res.last = r
		}
	}
	if _, err := Run(ctx, cfg); err != nil {
		return driftResult{}, err
	}
	return res, nil
}

// DriftBound is the number of ticks within which the loop must set
// model_drift after a plant change: the target the drift figures and
// their tests hold the detector to.
const DriftBound = 10

// DriftFigure is the result of one drift-detection run: the plant change
// (empty for none), the seed, and the ticks from the change to the first
// model_drift (-1: never), with its reason and, for the dead time, the
// estimate at that tick and at the run's last (the loop keeps estimating).
// For a run without a change, Ticks counts from the run's start:
// any value but -1 is a false alarm. EditAfter is the time from the change
// to the first setpoint edit after it within the run (empty: none), and
// MaxDeadTimeEvidence the dead-time test's largest figure before the first
// model_drift (for a run without a change: the whole run's, what the
// threshold must stay above).
//
// For a change of dead time, Visible is the most that any test could see of
// it within DriftBound ticks of the change (from the edit's tick on, in a run
// with one):
// the sum over those ticks of the squared
// residual it causes (the plant's gain times the rate's step times the
// dead time's change over the metric's period, the part of each period the
// step's response is late), in noise variances. A change of gain moves the
// signal at once; a change of dead time only delays the answer to the
// rate's steps, which at a steady rate are a fraction of the noise.
type DriftFigure struct {
	Change              string  `json:"change"`
	EditAfter           string  `json:"edit_after,omitempty"`
	Seed                uint64  `json:"seed"`
	Noise               float64 `json:"noise"`
	Ticks               int     `json:"ticks"`
	Reason              string  `json:"reason,omitempty"`
	DeadTimeS           float64 `json:"dead_time_s,omitempty"`
	LastDeadTimeS       float64 `json:"last_dead_time_s,omitempty"`
	MaxDeadTimeEvidence float64 `json:"max_dead_time_evidence"`
	Visible             float64 `json:"visible,omitempty"`
}

// MeasureDrift runs s with change at at (nil: no change) for seed and
// returns the figure. A run with a change ends after after.
func MeasureDrift(ctx context.Context, s sim.Scenario, change *sim.PlantChange, seed uint64, after time.Duration) (DriftFigure, error) {
	s.Seed = seed
	f := DriftFigure{Seed: seed, Noise: s.Noise, Ticks: -1}
	start, from := time.Duration(0), time.Duration(0) // the change's instant; the visible part's start
	if change != nil {
		s.PlantChanges = []sim.PlantChange{*change}
		s.Duration = min(s.Duration, change.At+after)
		f.Change, start, from = change.String(), change.At, change.At
		if e, ok := editAfter(s, change.At); ok {
			// The tick at the edit's instant answers it.
			f.EditAfter, from = e.String(), change.At+e-s.Tick
		}
	}
	res, err := driftRun(ctx, s)
	if err != nil {
		return f, err
	}
	f.MaxDeadTimeEvidence = res.maxDT
	if change != nil && change.DeadTime != nil && s.Noise > 0 {
		f.Visible = deadTimeVisible(s, *change, from, res.rates)
	}
	if res.first >= 0 {
		// The tick at the change's instant saw nothing of it: the first
		// tick after it is tick 1.
		f.Ticks = int((res.first - start + s.Tick - 1) / s.Tick)
		f.Reason = res.report.DriftReason
		if f.Reason == drift.ReasonDeadTime {
			f.DeadTimeS, f.LastDeadTimeS = res.report.DriftDeadTime.Seconds(), res.last.DriftDeadTime.Seconds()
		}
	}
	return f, nil
}

// editAfter is the time from at to the first setpoint edit of s after it
// within the run.
func editAfter(s sim.Scenario, at time.Duration) (time.Duration, bool) {
	for _, c := range s.SetpointChanges {
		if c.At > at && c.At < s.Duration {
			return c.At - at, true
		}
	}
	return 0, false
}

// deadTimeVisible is DriftFigure.Visible for change over the DriftBound
// ticks after from, from the rates of the ticks.
func deadTimeVisible(s sim.Scenario, change sim.PlantChange, from time.Duration, rates map[time.Duration]float64) float64 {
	before, after := s.PlantAt(change.At-time.Nanosecond), s.PlantAt(change.At)
	late := (after.DeadTime - before.DeadTime).Seconds() / s.MetricPeriod.Seconds()
	sum := 0.0
	for k := 1; k <= DriftBound; k++ {
		t := from + time.Duration(k)*s.Tick
		r, ok := rates[t]
		prev, okPrev := rates[t-s.Tick]
		if ok && okPrev {
			e := after.Gain * (r - prev) * late / s.Noise
			sum += e * e
		}
	}
	return sum
}
