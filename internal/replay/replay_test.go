package replay

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

var testPlant = Plant{
	Model:        control.FOPDT{Gain: 0.05, Tau: 15 * time.Second, DeadTime: 5 * time.Second, Base: 10},
	MetricPeriod: time.Minute, PipelineDelay: 150 * time.Second,
}

func testConfig(kp, ki float64) control.Config {
	m := testPlant.Model
	return control.Config{Kp: kp, Ki: ki, Min: 0, Max: 3000, AntiWindup: control.AntiWindupConditional,
		MeasurementMin: 0, MeasurementMax: 100, DelayAware: true, Feedforward: &m}
}

// closedLoop records cfg in closed loop on the plant with the load d (a
// step of `size` points from tick `at`) and a setpoint edit, as a loop's
// history would: the record a replay should reproduce.
func closedLoop(t *testing.T, cfg control.Config, size float64, at int) (Trace, []float64) {
	t.Helper()
	const n = 120
	var tr Trace
	load := make([]float64, n)
	for i := range n {
		tr.T = append(tr.T, float64(60*i))
		tr.Setpoint = append(tr.Setpoint, map[bool]float64{true: 50, false: 70}[i >= 80])
		if i >= at {
			load[i] = size
		}
	}
	tr.Measured, tr.Rate, tr.Consumed = make([]float64, n), make([]float64, n), make([]float64, n)
	tr.Consumed[0] = math.NaN()
	r, err := Simulate(Trace{T: tr.T, Setpoint: tr.Setpoint, Measured: fill(n, 10), Rate: fill(n, math.NaN()), Consumed: fill(n, math.NaN())}, load, cfg, testPlant)
	if err != nil {
		t.Fatal(err)
	}
	copy(tr.Measured, r.Measured)
	copy(tr.Rate, r.Rate)
	for i := 1; i < n; i++ {
		tr.Consumed[i] = tr.Rate[i-1]
	}
	return tr, load
}

func fill(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestDisturbanceRecoversTheLoad(t *testing.T) {
	tr, load := closedLoop(t, testConfig(0.08, 0.16), 20, 40)
	d := Disturbance(tr, testPlant)
	for i := range d {
		if math.Abs(d[i]-load[i]) > 1e-6 {
			t.Fatalf("tick %d: disturbance %.6f; want the load %v", i, d[i], load[i])
		}
	}
}

func TestCompare(t *testing.T) {
	good, bad := testConfig(0.08, 0.16), testConfig(0.008, 0.016)
	tr, _ := closedLoop(t, good, 20, 40)
	r, err := Compare(tr, testPlant, good, bad)
	if err != nil {
		t.Fatal(err)
	}
	if r.Fit.Measured < 99.9 || r.Fit.Rate < 99.9 {
		t.Errorf("fit of the live replay %+v; want 100 %% on a record from the same closed loop", r.Fit)
	}
	if r.Verdict != "keep" || r.IAERatio <= 1.2 {
		t.Errorf("sluggish shadow: iae_ratio %.3f, verdict %s (%s); want keep, worse", r.IAERatio, r.Verdict, r.Reason)
	}
	tr, _ = closedLoop(t, bad, 20, 40)
	if r, err = Compare(tr, testPlant, bad, good); err != nil || r.Verdict != "promote" || r.IAERatio >= 0.95 {
		t.Errorf("tuned shadow on a sluggish loop: iae_ratio %.3f, verdict %s (%s), %v; want promote", r.IAERatio, r.Verdict, r.Reason, err)
	}
}
