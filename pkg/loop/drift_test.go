package loop

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// samples builds a window of datapoints: the model predicts z above base,
// the plant shows y.
func samples(base float64, zs []float64, y func(i int, z float64) float64) []DriftSample {
	var s []DriftSample
	for i, z := range zs {
		s = append(s, DriftSample{End: time.Duration(i) * time.Minute, Z: z, Y: y(i, z)})
	}
	return s
}

func TestDriftSlope(t *testing.T) {
	zs := []float64{60, 60, 60, 50, 40, 35, 32, 30, 30, 30}
	for _, c := range []struct {
		name      string
		y         func(i int, z float64) float64
		wantSlope float64
		wantOK    bool
	}{
		{"model right", func(_ int, z float64) float64 { return 10 + z }, 0, true},
		{"gain doubled", func(_ int, z float64) float64 { return 10 + 2*z }, 1, true},
		{"gain halved", func(_ int, z float64) float64 { return 10 + 0.5*z }, -0.5, true},
		// A load of 20 points from the third datapoint: the residual jumps
		// while the prediction holds, then holds while it moves.
		{"load", func(i int, z float64) float64 {
			if i >= 2 {
				return 30 + z
			}
			return 10 + z
		}, 0, true},
	} {
		slope, se, ok := driftSlope(samples(10, zs, c.y), 10, 90*time.Second)
		if ok != c.wantOK || math.Abs(slope-c.wantSlope) > 0.02 {
			t.Errorf("%s: driftSlope = %.3f ± %.3f, %v; want %v, %v", c.name, slope, se, ok, c.wantSlope, c.wantOK)
		}
	}
	flat := []float64{60, 60.1, 59.9, 60, 60.2, 60, 59.8, 60, 60.1, 60}
	if _, _, ok := driftSlope(samples(10, flat, func(_ int, z float64) float64 { return 10 + 2*z }), 10, 90*time.Second); ok {
		t.Error("driftSlope at a steady rate: a verdict; want none (a gain error cannot be told from a load)")
	}
}

// trackDrift through the controller: a plant whose gain doubled sets
// model_drift once the rate moves; the same loop on the right plant never
// does; a new model starts over.
func TestTrackDrift(t *testing.T) {
	model := control.FOPDT{Gain: 0.05, Base: 10}
	run := func(trueGain float64) DriftState {
		p := Params{Feedforward: &model, Controls: Controls{DelayAware: true}}
		cfg := control.Config{Kp: 1, Ki: 0.2, Max: 3000, MeasurementMax: 100, Feedforward: &model, DelayAware: true,
			SetpointFilter: 80 * time.Second, AntiWindup: control.AntiWindupConditional}
		c := control.Controller{Config: cfg}
		var d DriftState
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
	if got := trackDrift(d, p, cs, control.Input{Measurement: math.NaN()}, false, false, time.Now()); got.ModelDrift || len(got.Samples) != 0 || got.Model != other {
		t.Errorf("after a model edit: %+v; want a fresh record for the new model", got)
	}
	if got := trackDrift(d, Params{}, cs, control.Input{}, false, true, time.Now()); got.ModelDrift || len(got.Samples) != 0 {
		t.Errorf("without a model: %+v; want an empty record", got)
	}
}

// A datapoint at the ceiling, and the next one, whose period may have held
// the pinning's end (its average is cut too), are kept as lower bounds
// (Cut): the pinned one at the ceiling less twice the noise band, the next
// one at its value less the band. The slope test leaves them out.
func TestTrackDriftCutsPinned(t *testing.T) {
	m := control.FOPDT{Gain: 0.05, Base: 10}
	p := Params{Feedforward: &m, Controls: Controls{DelayAware: true, NoiseBand: 2}}
	var d DriftState
	for k, y := range []float64{70, 70, 100.4, 95, 80} {
		cs := control.State{Applied: []control.Segment{{At: -time.Hour, Value: 1200}}, Clock: time.Duration(k+1) * time.Minute}
		in := control.Input{Measurement: y, MeasurementPeriod: time.Minute}
		d = trackDrift(d, p, cs, in, false, y <= 100, time.Unix(int64(60*k), 0))
	}
	want := []DriftSample{
		{End: time.Minute, Y: 70, Z: 60},
		{End: 2 * time.Minute, Y: 70, Z: 60},
		{End: 3 * time.Minute, Y: driftPinned - 4, Z: 60, Cut: true},
		{End: 4 * time.Minute, Y: 93, Z: 60, Cut: true},
		{End: 5 * time.Minute, Y: 80, Z: 60},
	}
	if !slices.EqualFunc(d.Samples, want, func(a, b DriftSample) bool {
		return a.End == b.End && a.Cut == b.Cut && math.Abs(a.Y-b.Y) < 1e-9 && math.Abs(a.Z-b.Z) < 1e-9
	}) || !d.Pinned || d.PinnedEnd != 3*time.Minute {
		t.Fatalf("samples %+v, pinned %v at %v; want %+v and the pinned one at 3m", d.Samples, d.Pinned, d.PinnedEnd, want)
	}
}

// A tick limited by demand (its rate measured from the consumers' report,
// an average over the tick) leaves out of the record every datapoint whose
// prediction draws on it: with a 1-minute period, the model's 5 s of dead
// time and 15 s of lag, those that end less than 3m50s after it.
func TestTrackDriftLeavesOutMeasuredRates(t *testing.T) {
	m := control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	p := Params{Feedforward: &m, Controls: Controls{DelayAware: true}}
	var d DriftState
	var ends []time.Duration
	for k := 1; k <= 10; k++ {
		clock := time.Duration(k) * time.Minute
		cs := control.State{Applied: []control.Segment{{At: -time.Hour, Value: 1200}}, Clock: clock}
		in := control.Input{Measurement: 70, MeasurementPeriod: time.Minute}
		d = trackDrift(d, p, cs, in, k == 3, true, time.Unix(int64(60*k), 0))
		if k == 3 && d.LimitedAt != clock {
			t.Errorf("LimitedAt = %v after a limited tick at %v", d.LimitedAt, clock)
		}
	}
	for _, x := range d.Samples {
		ends = append(ends, x.End)
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute}
	if !slices.Equal(ends, want) {
		t.Errorf("datapoints kept end at %v; want %v (3 to 6 minutes draw on the tick limited at 3m)", ends, want)
	}
}
