package ident

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// stepTest simulates model m for a step of the input from u0 to u1 at time
// at, sampled every dt until end, with Gaussian measurement noise of standard
// deviation noise.
func stepTest(m control.FOPDT, u0, u1 float64, at, dt, end time.Duration, noise float64, seed uint64) Data {
	var d Data
	for t := time.Duration(0); t <= end; t += dt {
		u := u0
		if t >= at {
			u = u1
		}
		d.T = append(d.T, t.Seconds())
		d.U = append(d.U, u)
	}
	d.Y = Simulate(m, d.T, d.U)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := range d.Y {
		d.Y[i] += noise * r.NormFloat64()
	}
	return d
}

var reference = control.FOPDT{Gain: 0.05, Tau: 15 * time.Second, DeadTime: 5 * time.Second, Base: 10}

func relErr(got, want float64) float64 { return math.Abs(got-want) / math.Abs(want) }

func TestSimulateStep(t *testing.T) {
	m := control.FOPDT{Gain: 2, Tau: 10 * time.Second, DeadTime: 3 * time.Second, Base: 1}
	tt := []float64{0, 1, 2, 3, 4, 5, 13, 23.5, 1000}
	u := []float64{0, 1, 1, 1, 1, 1, 1, 1, 1}
	got := Simulate(m, tt, u)
	for i, ti := range tt {
		want := 1.0
		if ti > 4 { // step at t=1, dead time 3
			want = 1 + 2*(1-math.Exp(-(ti-4)/10))
		}
		if math.Abs(got[i]-want) > 1e-12 {
			t.Errorf("Simulate at t=%v = %v; want %v", ti, got[i], want)
		}
	}
}

func TestFitNoiseless(t *testing.T) {
	tests := []struct {
		name string
		m    control.FOPDT
		dt   time.Duration
	}{
		{"reference", reference, time.Second},
		{"no dead time", control.FOPDT{Gain: 0.1, Tau: 30 * time.Second, Base: 5}, time.Second},
		{"dead time between samples", control.FOPDT{Gain: 0.02, Tau: 40 * time.Second, DeadTime: 7500 * time.Millisecond, Base: 20}, 2 * time.Second},
		{"delay dominant", control.FOPDT{Gain: 0.05, Tau: 3 * time.Second, DeadTime: 20 * time.Second, Base: 10}, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := stepTest(tc.m, 400, 1000, time.Minute, tc.dt, 5*time.Minute, 0, 1)
			r, err := Fit(d)
			if err != nil {
				t.Fatalf("Fit: %v", err)
			}
			got := r.Model
			if relErr(got.Gain, tc.m.Gain) > 1e-3 || math.Abs(got.Base-tc.m.Base) > 1e-2 ||
				(got.Tau-tc.m.Tau).Abs() > 50*time.Millisecond || (got.DeadTime-tc.m.DeadTime).Abs() > 50*time.Millisecond {
				t.Errorf("Fit = %+v; want %+v", got, tc.m)
			}
			if r.RMSE > 1e-3 {
				t.Errorf("Fit RMSE = %v; want about 0", r.RMSE)
			}
		})
	}
}

// TestFitNoisy is the acceptance check of issue 2: with 1 point of noise the
// gain and tau+theta are recovered within 10%, over several seeds and test
// designs.
func TestFitNoisy(t *testing.T) {
	tests := []struct {
		name        string
		m           control.FOPDT
		u0, u1      float64
		at, dt, end time.Duration
	}{
		{"reference", reference, 400, 1000, time.Minute, time.Second, 5 * time.Minute},
		{"slow plant", control.FOPDT{Gain: 0.08, Tau: 40 * time.Second, DeadTime: 10 * time.Second, Base: 15}, 400, 1000, time.Minute, time.Second, 5 * time.Minute},
		{"fast plant", control.FOPDT{Gain: 0.03, Tau: 5 * time.Second, DeadTime: 2 * time.Second, Base: 5}, 400, 1000, time.Minute, time.Second, 5 * time.Minute},
		{"step after 3 samples", reference, 400, 1000, 3 * time.Second, time.Second, 5 * time.Minute},
		{"5 s samples", reference, 400, 1000, time.Minute, 5 * time.Second, 5 * time.Minute},
		{"long tail", reference, 400, 1000, time.Minute, time.Second, time.Hour},
		{"minutes", control.FOPDT{Gain: 0.05, Tau: 5 * time.Minute, DeadTime: time.Minute, Base: 10}, 400, 1000, 5 * time.Minute, 5 * time.Second, 40 * time.Minute},
		{"small step", reference, 800, 1000, time.Minute, time.Second, 5 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			var worstGain, worstSum float64
			for seed := uint64(1); seed <= 10; seed++ {
				d := stepTest(m, tc.u0, tc.u1, tc.at, tc.dt, tc.end, 1, seed)
				r, err := Fit(d)
				if err != nil {
					t.Fatalf("Fit(%+v, seed %d): %v", m, seed, err)
				}
				eg := relErr(r.Model.Gain, m.Gain)
				es := relErr((r.Model.Tau + r.Model.DeadTime).Seconds(), (m.Tau + m.DeadTime).Seconds())
				worstGain, worstSum = math.Max(worstGain, eg), math.Max(worstSum, es)
				if eg > 0.10 || es > 0.10 {
					t.Errorf("Fit(%+v, seed %d) = %+v; gain error %.1f%%, tau+theta error %.1f%%, want within 10%%", m, seed, r.Model, 100*eg, 100*es)
				}
				if r.RMSE < 0.7 || r.RMSE > 1.3 {
					t.Errorf("Fit(%+v, seed %d) RMSE = %.3f; want about the noise, 1", m, seed, r.RMSE)
				}
			}
			t.Logf("worst over 10 seeds: gain error %.2f%%, tau+theta error %.2f%%", 100*worstGain, 100*worstSum)
		})
	}
}

func TestFitStepDown(t *testing.T) {
	d := stepTest(reference, 1000, 400, time.Minute, time.Second, 5*time.Minute, 0.5, 3)
	r, err := Fit(d)
	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	if relErr(r.Model.Gain, reference.Gain) > 0.05 || math.Abs(r.Model.Base-reference.Base) > 1 {
		t.Errorf("Fit(step down) = %+v; want %+v", r.Model, reference)
	}
}

func TestTwoPoint(t *testing.T) {
	d := stepTest(reference, 400, 1000, time.Minute, 500*time.Millisecond, 5*time.Minute, 0, 1)
	m, err := TwoPoint(d)
	if err != nil {
		t.Fatalf("TwoPoint: %v", err)
	}
	// Exact for a noiseless FOPDT response, up to the light smoothing and
	// the sampling.
	if relErr(m.Gain, reference.Gain) > 1e-3 || (m.Tau-reference.Tau).Abs() > time.Second || (m.DeadTime-reference.DeadTime).Abs() > time.Second {
		t.Errorf("TwoPoint = %+v; want about %+v", m, reference)
	}
}

func TestFitErrors(t *testing.T) {
	good := stepTest(reference, 400, 1000, time.Minute, time.Second, 3*time.Minute, 0, 1)
	clone := func(f func(d *Data)) Data {
		d := Data{T: append([]float64(nil), good.T...), U: append([]float64(nil), good.U...), Y: append([]float64(nil), good.Y...)}
		f(&d)
		return d
	}
	tests := []struct {
		name string
		d    Data
		want error
		msg  string
	}{
		{"no step", clone(func(d *Data) {
			for i := range d.U {
				d.U[i] = 400
			}
		}), ErrNoStep, "no step in the input"},
		{"time goes back", clone(func(d *Data) { d.T[50] = d.T[48] }), ErrTimeOrder, "sample 50"},
		{"repeated time", clone(func(d *Data) { d.T[51] = d.T[50] }), ErrTimeOrder, "sample 51"},
		{"NaN output", clone(func(d *Data) { d.Y[7] = math.NaN() }), ErrNotFinite, "sample 7: output is NaN"},
		{"Inf input", clone(func(d *Data) { d.U[9] = math.Inf(1) }), ErrNotFinite, "sample 9: input is +Inf"},
		{"too few", Data{T: good.T[55:62], U: good.U[55:62], Y: good.Y[55:62]}, ErrTooFewSamples, "7 samples"},
		{"step at the end", Data{T: good.T[:62], U: good.U[:62], Y: good.Y[:62]}, ErrTooFewSamples, "after the step"},
		{"no response", clone(func(d *Data) {
			for i := range d.Y {
				d.Y[i] = 30
			}
		}), ErrNoResponse, "does not respond"},
		{"negative gain", clone(func(d *Data) {
			for i := range d.Y {
				d.Y[i] = 60 - d.Y[i]
			}
		}), ErrNoResponse, "fitted gain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Fit(tc.d)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Fit() error = %v; want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Fit() error = %q; want it to mention %q", err, tc.msg)
			}
		})
	}
	if _, err := Fit(Data{T: []float64{1, 2}, U: []float64{1}, Y: []float64{1, 2}}); err == nil || !strings.Contains(err.Error(), "lengths differ") {
		t.Errorf("Fit(unequal lengths) error = %v; want lengths differ", err)
	}
}

// TestFitJitteryInput identifies from a recorded rate that jitters around
// its commanded values, as a real consumer's measured rate does.
func TestFitJitteryInput(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		d := stepTest(reference, 600, 1200, time.Minute, time.Second, 5*time.Minute, 0, seed)
		r := rand.New(rand.NewPCG(seed, 99))
		for i := range d.U {
			d.U[i] += 5 * r.NormFloat64() // +-5 msg/s of jitter on a 600 msg/s step
		}
		d.Y = Simulate(reference, d.T, d.U)
		for i := range d.Y {
			d.Y[i] += r.NormFloat64()
		}
		res, err := Fit(d)
		if err != nil {
			t.Fatalf("Fit(seed %d): %v", seed, err)
		}
		m := res.Model
		if eg, es := relErr(m.Gain, reference.Gain), relErr((m.Tau+m.DeadTime).Seconds(), 20); eg > 0.10 || es > 0.10 {
			t.Errorf("Fit(jittery input, seed %d) = %+v; want %+v within 10%%", seed, m, reference)
		}
		if g := res.Guess; relErr(g.Gain, reference.Gain) > 0.10 || math.Abs(g.Base-reference.Base) > 2 {
			t.Errorf("TwoPoint(jittery input, seed %d) = %+v; want about %+v", seed, g, reference)
		}
	}
}

// TestFitUpAndDown fits a test whose input steps up and back down: the
// two-point guess uses the largest step, the least-squares fit all of it.
func TestFitUpAndDown(t *testing.T) {
	d := stepTest(reference, 600, 1200, time.Minute, time.Second, 5*time.Minute, 1, 4)
	for i, ti := range d.T {
		if ti >= 180 {
			d.U[i] = 900
		}
	}
	y := Simulate(reference, d.T, d.U)
	r := rand.New(rand.NewPCG(4, 4))
	for i := range y {
		d.Y[i] = y[i] + r.NormFloat64()
	}
	res, err := Fit(d)
	if err != nil {
		t.Fatalf("Fit: %v", err)
	}
	if m := res.Model; relErr(m.Gain, reference.Gain) > 0.05 || relErr((m.Tau+m.DeadTime).Seconds(), 20) > 0.10 {
		t.Errorf("Fit(up and down) = %+v; want %+v", m, reference)
	}
}
