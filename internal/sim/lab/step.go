package lab

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// FittedModel is an identified model as the lab prints it: gain in points
// of CPU per message/s, times in seconds, base in points.
type FittedModel struct {
	Gain     float64 `json:"gain"`
	Tau      float64 `json:"tau_s"`
	DeadTime float64 `json:"dead_time_s"`
	Base     float64 `json:"base"`
}

// Fit is what `lab identify --json` and `lab step --json` print: the
// model and the fit's root-mean-square error, points.
type Fit struct {
	Model FittedModel `json:"model"`
	RMSE  float64     `json:"rmse"`
}

// FitOf is r as the lab prints it.
func FitOf(r ident.Result) Fit {
	return Fit{
		Model: FittedModel{
			Gain:     r.Model.Gain,
			Tau:      r.Model.Tau.Seconds(),
			DeadTime: r.Model.DeadTime.Seconds(),
			Base:     r.Model.Base,
		},
		RMSE: r.RMSE,
	}
}

// SimulatedStepTest runs step test st on scenario s's plant (without its
// disturbances), sampling the plant's CPU every sample with the scenario's
// noise: the metric pipeline is replaced by a fine one without publication
// delay, because the model to identify is the plant's (the pipeline's delay is
// known configuration, added before tuning: see tuning.LoopModel and
// sim.Scenario.PipelineDelay). It refuses a test that would saturate the
// plant's CPU at 0 or 100 %, which would say nothing about its dynamics.
func SimulatedStepTest(s sim.Scenario, st sim.StepTest, sample time.Duration) (ident.Data, error) {
	if sample <= 0 || sample > time.Minute {
		return ident.Data{}, fmt.Errorf("sample period %v: must be positive and at most 1m", sample)
	}
	for _, u := range []float64{st.From, st.To} {
		if y := s.Plant.Output(u); y >= 100 || y <= 0 {
			return ident.Data{}, fmt.Errorf("a rate of %g msg/s would take the plant's CPU to %.4g %%: it saturates at 0 and 100 %%, so the test would say nothing about its dynamics; choose step rates within its range", u, y)
		}
	}
	s.MetricPeriod = sample
	s.MetricDelay = 0
	if s.Step == 0 || s.Step > sample {
		s.Step = min(sample, time.Second)
	}
	if s.Tick < s.Step {
		s.Tick = s.Step
	}
	d, err := sim.RunStepTest(s, st)
	if err != nil {
		return ident.Data{}, fmt.Errorf("step test: %w", err)
	}
	return d, nil
}

// StepTestFor is the step test on scenario s from rate from to rate to
// (nil: the default) at at. The default steps from half the rate that
// holds the setpoint on the nominal plant to that rate; without
// durationSet the test lasts max(8 minutes, 20 x (tau + dead time)) after
// the step, else s.Duration.
func StepTestFor(s sim.Scenario, from, to *float64, at time.Duration, durationSet bool) sim.StepTest {
	nominal := s.Plant.Input(s.Setpoint)
	st := sim.StepTest{From: nominal / 2, To: nominal, At: at, Duration: s.Duration}
	if from != nil {
		st.From = *from
	}
	if to != nil {
		st.To = *to
	}
	if !durationSet {
		st.Duration = at + max(8*time.Minute, 20*(s.Plant.Tau+s.Plant.DeadTime))
	}
	return st
}
