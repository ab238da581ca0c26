package demo

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// FirstDrift runs the demo's production loop on s, tuned by Tune, and
// returns the virtual time since the run's start of the first tick whose
// report says model_drift, or -1 when no tick does.
func FirstDrift(ctx context.Context, s sim.Scenario) (time.Duration, error) {
	first, _, err := driftRun(ctx, s)
	return first, err
}

// driftRun is FirstDrift that also returns the rate of each tick, by its
// virtual time since the start.
func driftRun(ctx context.Context, s sim.Scenario) (time.Duration, map[time.Duration]float64, error) {
	ctrl, _, err := Tune(s)
	if err != nil {
		return 0, nil, err
	}
	first := time.Duration(-1)
	rates := map[time.Duration]float64{}
	cfg := Config{Scenario: s, Params: DefaultParams(s, ctrl), BatchSize: 10, NoSeries: true, Start: epoch}
	cfg.OnTick = func(tk Tick) {
		for _, r := range tk.Reports {
			if r.ModelDrift && first < 0 {
				first = tk.Now.Sub(epoch)
			}
			rates[tk.Now.Sub(epoch)] = r.Rate
		}
	}
	if _, err := Run(ctx, cfg); err != nil {
		return 0, nil, err
	}
	return first, rates, nil
}

// DriftBound is the number of ticks within which a plant change must be
// said (issue 20).
const DriftBound = 10

// DriftFigure is the result of one drift-detection run: the plant change
// (empty for none), the seed, and the ticks from the change to the first
// model_drift (-1: never). For a run without a change, Ticks counts from
// the run's start: any value but -1 is a false alarm.
//
// For a change of dead time, Visible is the most that any test could see of
// it within DriftBound ticks: the sum over those ticks of the squared
// residual it causes (the plant's gain times the rate's step times the
// dead time's change over the metric's period, the part of each period the
// step's response is late), in noise variances. A change of gain moves the
// signal at once; a change of dead time only delays the answer to the
// rate's steps, which at a steady rate are a fraction of the noise.
type DriftFigure struct {
	Change  string  `json:"change"`
	Seed    uint64  `json:"seed"`
	Noise   float64 `json:"noise"`
	Ticks   int     `json:"ticks"`
	Visible float64 `json:"visible,omitempty"`
}

// MeasureDrift runs s with change at at (nil: no change) for seed and
// returns the figure. A run with a change ends after after.
func MeasureDrift(ctx context.Context, s sim.Scenario, change *sim.PlantChange, seed uint64, after time.Duration) (DriftFigure, error) {
	s.Seed = seed
	f := DriftFigure{Seed: seed, Noise: s.Noise, Ticks: -1}
	from := time.Duration(0)
	if change != nil {
		s.PlantChanges = []sim.PlantChange{*change}
		s.Duration = min(s.Duration, change.At+after)
		f.Change, from = change.String(), change.At
	}
	at, rates, err := driftRun(ctx, s)
	if err != nil {
		return f, err
	}
	if change != nil && change.DeadTime != nil && s.Noise > 0 {
		f.Visible = deadTimeVisible(s, *change, rates)
	}
	if at >= 0 {
		// The tick at the change's instant saw nothing of it: the first
		// tick after it is tick 1.
		f.Ticks = int((at - from + s.Tick - 1) / s.Tick)
	}
	return f, nil
}

// deadTimeVisible is DriftFigure.Visible for change, from the rates of the
// ticks.
func deadTimeVisible(s sim.Scenario, change sim.PlantChange, rates map[time.Duration]float64) float64 {
	before, after := s.PlantAt(change.At-time.Nanosecond), s.PlantAt(change.At)
	late := (after.DeadTime - before.DeadTime).Seconds() / s.MetricPeriod.Seconds()
	sum := 0.0
	for k := 1; k <= DriftBound; k++ {
		t := change.At + time.Duration(k)*s.Tick
		r, ok := rates[t]
		prev, okPrev := rates[t-s.Tick]
		if ok && okPrev {
			e := after.Gain * (r - prev) * late / s.Noise
			sum += e * e
		}
	}
	return sum
}
