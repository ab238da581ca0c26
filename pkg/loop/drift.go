package loop

import (
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/drift"
)

// trackDrift runs the loop's drift detector (pkg/drift) on the tick's
// datapoint: the model is PARAMS ff_gain, ff_base, ff_tau, ff_dead_time,
// its answer the one to the rates the controller applied (the delay-aware
// integrator's history). A loop without a model or without delay_aware
// keeps an empty record. in is the controller's input, cs its state after
// the update and limited its Output.ActualLimited; STATE keeps what it
// returns.
func trackDrift(d drift.State, p Params, cs control.State, in control.Input, limited, fresh bool, now time.Time) drift.State {
	det := drift.Detector{Config: drift.Config{NoiseBand: p.NoiseBand, TickPeriod: p.TickPeriod}, State: d}
	di := drift.Input{
		Clock:       cs.Clock,
		Measurement: in.Measurement, MeasurementAge: in.MeasurementAge, MeasurementPeriod: in.MeasurementPeriod,
		Fresh: fresh, Limited: limited, Now: now,
	}
	if m := p.Feedforward; m != nil && p.DelayAware && len(cs.Applied) > 0 {
		di.Model = drift.Model{Gain: m.Gain, Tau: m.Tau, DeadTime: m.DeadTime, Base: m.Base}
		di.Response = func(dead, from, to time.Duration) float64 {
			f := *m
			f.DeadTime = dead
			return f.Expected(cs.Applied, from, to)
		}
	}
	det.Update(di)
	return det.State
}
