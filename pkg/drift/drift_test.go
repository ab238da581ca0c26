package drift

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// samples builds a window of datapoints: the model predicts z above base,
// the plant shows y.
func samples(base float64, zs []float64, y func(i int, z float64) float64) []Sample {
	var s []Sample
	for i, z := range zs {
		s = append(s, Sample{End: time.Duration(i) * time.Minute, Z: z, Y: y(i, z)})
	}
	return s
}

func TestSlopeTest(t *testing.T) {
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
		slope, se, ok := slopeTest(samples(10, zs, c.y), 10, 90*time.Second)
		if ok != c.wantOK || math.Abs(slope-c.wantSlope) > 0.02 {
			t.Errorf("%s: driftSlope = %.3f ± %.3f, %v; want %v, %v", c.name, slope, se, ok, c.wantSlope, c.wantOK)
		}
	}
	flat := []float64{60, 60.1, 59.9, 60, 60.2, 60, 59.8, 60, 60.1, 60}
	if _, _, ok := slopeTest(samples(10, flat, func(_ int, z float64) float64 { return 10 + 2*z }), 10, 90*time.Second); ok {
		t.Error("driftSlope at a steady rate: a verdict; want none (a gain error cannot be told from a load)")
	}
}

// A datapoint at the ceiling, and the next one, whose period may have held
// the pinning's end (its average is cut too), are kept as lower bounds
// (Cut): the pinned one at the ceiling less twice the noise band, the next
// one at its value less the band. The slope test leaves them out.
func TestUpdateCutsPinned(t *testing.T) {
	m := Model{Gain: 0.05, Base: 10}
	det := Detector{Config: Config{NoiseBand: 2}}
	h := response(m, []control.Segment{{At: -time.Hour, Value: 1200}})
	for k, y := range []float64{70, 70, 100.4, 95, 80} {
		det.Update(Input{Model: m, Response: h, Clock: time.Duration(k+1) * time.Minute, Measurement: y,
			MeasurementPeriod: time.Minute, Fresh: y <= 100, Now: time.Unix(int64(60*k), 0)})
	}
	d := det.State
	want := []Sample{
		{End: time.Minute, Y: 70, Z: 60},
		{End: 2 * time.Minute, Y: 70, Z: 60},
		{End: 3 * time.Minute, Y: ceiling - 4, Z: 60, Cut: true},
		{End: 4 * time.Minute, Y: 93, Z: 60, Cut: true},
		{End: 5 * time.Minute, Y: 80, Z: 60},
	}
	if !slices.EqualFunc(d.Samples, want, func(a, b Sample) bool {
		return a.End == b.End && a.Cut == b.Cut && math.Abs(a.Y-b.Y) < 1e-9 && math.Abs(a.Z-b.Z) < 1e-9
	}) || !d.Pinned || d.PinnedEnd != 3*time.Minute {
		t.Fatalf("samples %+v, pinned %v at %v; want %+v and the pinned one at 3m", d.Samples, d.Pinned, d.PinnedEnd, want)
	}
}

// A tick limited by demand (its rate measured from the consumers' report,
// an average over the tick) leaves out of the record every datapoint whose
// prediction draws on it: with a 1-minute period, the model's 5 s of dead
// time and 15 s of lag, those that end less than 3m50s after it.
func TestUpdateLeavesOutMeasuredRates(t *testing.T) {
	m := Model{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	var det Detector
	h := response(m, []control.Segment{{At: -time.Hour, Value: 1200}})
	var ends []time.Duration
	for k := 1; k <= 10; k++ {
		clock := time.Duration(k) * time.Minute
		det.Update(Input{Model: m, Response: h, Clock: clock, Measurement: 70, MeasurementPeriod: time.Minute,
			Fresh: true, Limited: k == 3, Now: time.Unix(int64(60*k), 0)})
		if k == 3 && det.State.LimitedAt != clock {
			t.Errorf("LimitedAt = %v after a limited tick at %v", det.State.LimitedAt, clock)
		}
	}
	for _, x := range det.State.Samples {
		ends = append(ends, x.End)
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute}
	if !slices.Equal(ends, want) {
		t.Errorf("datapoints kept end at %v; want %v (3 to 6 minutes draw on the tick limited at 3m)", ends, want)
	}
}

// response is pkg/control's answer of m to the rate history h, what
// pkg/loop passes as Input.Response.
func response(m Model, h []control.Segment) Response {
	f := control.FOPDT{Gain: m.Gain, Tau: m.Tau, Base: m.Base}
	return func(dead, from, to time.Duration) float64 {
		f.DeadTime = dead
		return f.Expected(h, from, to)
	}
}

// A new model starts the record over; a loop without a model (no
// Response) keeps an empty record; a NaN or Inf datapoint adds nothing.
func TestUpdateModelAndInvalid(t *testing.T) {
	m := Model{Gain: 0.05, Base: 10}
	h := response(m, []control.Segment{{At: -time.Hour, Value: 1200}})
	det := Detector{State: State{Model: m, ModelDrift: true, Reason: ReasonGain, Samples: []Sample{{End: time.Minute, Y: 70, Z: 60}}}}
	for _, y := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		det.Update(Input{Model: m, Response: h, Clock: time.Hour, Measurement: y, MeasurementPeriod: time.Minute, Fresh: true})
		if len(det.State.Samples) != 1 || !det.State.ModelDrift {
			t.Errorf("Update(measurement %v) = %+v; want the record unchanged", y, det.State)
		}
	}
	other := m
	other.Gain = 0.1
	det.Update(Input{Model: other, Response: h, Clock: time.Hour, Measurement: math.NaN(), MeasurementPeriod: time.Minute})
	if got := det.State; got.ModelDrift || len(got.Samples) != 0 || got.Model != other {
		t.Errorf("after a model edit: %+v; want a fresh record for the new model", got)
	}
	det.State.Samples = []Sample{{End: time.Minute}}
	det.Update(Input{Model: other, Clock: 2 * time.Hour, Measurement: 70, Fresh: true})
	if got := det.State; got.ModelDrift || len(got.Samples) != 0 || got.Model != (Model{}) {
		t.Errorf("without a response: %+v; want an empty record", got)
	}
}
