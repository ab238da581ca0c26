package loop

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/drift"
)

// trackDrift through the controller: a plant whose gain doubled sets
// model_drift once the rate moves; the same loop on the right plant never
// does; a new model starts over.
func TestTrackDrift(t *testing.T) {
	model := control.FOPDT{Gain: 0.05, Base: 10}
	run := func(trueGain float64) drift.State {
		p := Params{Feedforward: &model, Controls: Controls{DelayAware: true}}
		cfg := control.Config{Kp: 1, Ki: 0.2, Max: 3000, MeasurementMax: 100, Feedforward: &model, DelayAware: true,
			SetpointFilter: 80 * time.Second, AntiWindup: control.AntiWindupConditional}
		c := control.Controller{Config: cfg}
		var d drift.State
		var applied []float64 // rate per minute
		y := 10.0
		for k := range 40 {
			in := control.Input{Setpoint: 70, Measurement: y, MeasurementAge: 2 * time.Minute, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute}
			out := c.Update(in)
			d = trackDrift(d, p, c.State, in, false, true, time.Unix(int64(60*k), 0))
			applied = append(applied, out.Rate)
			// The datapoint of the next tick covers the minute that ended
			// two minutes before it: the rate applied three ticks before.
			if j := len(applied) - 3; j >= 0 {
				y = math.Min(100, 10+trueGain*applied[j])
			}
		}
		return d
	}
	if d := run(0.05); d.ModelDrift {
		t.Errorf("right model: model_drift set (gain ratio %.2f ± %.2f)", d.GainRatio, d.SlopeSE)
	}
	d := run(0.1)
	if !d.ModelDrift || math.Abs(d.GainRatio-2) > 0.3 {
		t.Errorf("gain doubled: model_drift %v, gain ratio %.2f; want set, about 2", d.ModelDrift, d.GainRatio)
	}
	other := model
	other.Gain = 0.1
	p := Params{Feedforward: &other, Controls: Controls{DelayAware: true}}
	cs := control.State{Applied: []control.Segment{{At: 0, Value: 1}}, Clock: time.Hour}
	if got := trackDrift(d, p, cs, control.Input{Measurement: math.NaN()}, false, false, time.Now()); got.ModelDrift || len(got.Samples) != 0 || got.Model != (drift.Model{Gain: other.Gain, Base: other.Base}) {
		t.Errorf("after a model edit: %+v; want a fresh record for the new model", got)
	}
	if got := trackDrift(d, Params{}, cs, control.Input{}, false, true, time.Now()); got.ModelDrift || len(got.Samples) != 0 {
		t.Errorf("without a model: %+v; want an empty record", got)
	}
}
