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
	ctrl, _, err := Tune(s)
	if err != nil {
		return 0, err
	}
	first := time.Duration(-1)
	cfg := Config{Scenario: s, Params: DefaultParams(s, ctrl), BatchSize: 10, NoSeries: true, Start: epoch}
	cfg.OnTick = func(tk Tick) {
		for _, r := range tk.Reports {
			if r.ModelDrift && first < 0 {
				first = tk.Now.Sub(epoch)
			}
		}
	}
	if _, err := Run(ctx, cfg); err != nil {
		return 0, err
	}
	return first, nil
}

// DriftFigure is the result of one drift-detection run: the plant change
// (empty for none), the seed, and the ticks from the change to the first
// model_drift (-1: never). For a run without a change, Ticks counts from
// the run's start: any value but -1 is a false alarm.
type DriftFigure struct {
	Change string  `json:"change"`
	Seed   uint64  `json:"seed"`
	Noise  float64 `json:"noise"`
	Ticks  int     `json:"ticks"`
}

// MeasureDrift runs s with change at at (nil: no change) for seed and
// returns the figure. A run with a change lasts until after ticks after it.
func MeasureDrift(ctx context.Context, s sim.Scenario, change *sim.PlantChange, seed uint64, after time.Duration) (DriftFigure, error) {
	s.Seed = seed
	f := DriftFigure{Seed: seed, Noise: s.Noise, Ticks: -1}
	from := time.Duration(0)
	if change != nil {
		s.PlantChanges = []sim.PlantChange{*change}
		s.Duration = min(s.Duration, change.At+after)
		f.Change, from = change.String(), change.At
	}
	at, err := FirstDrift(ctx, s)
	if err != nil || at < 0 {
		return f, err
	}
	// The tick at the change's instant saw nothing of it: the first tick
	// after it is tick 1.
	f.Ticks = int((at - from + s.Tick - 1) / s.Tick)
	return f, nil
}
