package lab

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
)

// smithPlant is the reference scenario's plant: 0.05 points per msg/s over
// a base of 10 points, a lag of 15 s and a dead time of 5 s.
var smithPlant = sim.Reference().Plant

func TestSmithPredictorTracksSetpoint(t *testing.T) {
	loop := smithPlant
	loop.DeadTime = 125 * time.Second // plant 5 s + the test plant's 60 s average + 60 s publication
	c := SmithPredictor{Config: SmithConfig{Ki: 1 / (loop.Gain * 120), Min: 0, Max: 3000, Model: loop}}
	p := sim.NewPlant(smithPlant, time.Second, 0)
	last, prev := p.CPU(0), p.CPU(0)
	var cpu []float64
	overshoot := math.Inf(-1)
	for range 60 {
		out := c.Update(control.Input{Setpoint: 70, Measurement: prev, SamplingInterval: time.Minute})
		prev = last
		sum := 0.0
		for range 60 {
			sum += p.Step(out.Rate, 0)
		}
		last = sum / 60
		cpu = append(cpu, last)
		overshoot = math.Max(overshoot, last-70)
	}
	if e := math.Abs(cpu[len(cpu)-1] - 70); e > 0.5 {
		t.Fatalf("CPU after an hour = %v; want 70 +- 0.5", cpu[len(cpu)-1])
	}
	if overshoot > 2 {
		t.Fatalf("overshoot %v points; want at most 2 with an exact model", overshoot)
	}
}

func TestSmithPredictorHoldsOnBadMeasurement(t *testing.T) {
	c := SmithPredictor{Config: SmithConfig{Kp: 1, Ki: 0.01, Min: 0, Max: 3000, Model: smithPlant, MeasurementMin: 0, MeasurementMax: 100}}
	c.Update(control.Input{Setpoint: 70, Measurement: 30, SamplingInterval: time.Minute})
	before := c.State
	out := c.Update(control.Input{Setpoint: 70, Measurement: math.NaN(), SamplingInterval: time.Minute})
	if !out.Held || out.Rate != before.Output || c.State.Integral != before.Integral {
		t.Fatalf("NaN measurement: %+v; want held", out)
	}
}

// A SmithPredictor restored from its JSON at tick 30 gives the original's
// every output from then on.
func TestSmithStateJSONRoundTrip(t *testing.T) {
	cfg := SmithConfig{Kp: 2, Ki: 0.02, Min: 0, Max: 3000, Slew: 300, Model: smithPlant}
	in := func(k int) control.Input {
		return control.Input{Setpoint: 70, Measurement: 50 + 20*math.Sin(float64(k)/5), SamplingInterval: time.Minute}
	}
	orig := SmithPredictor{Config: cfg}
	var restored SmithPredictor
	for k := range 80 {
		if k == 30 {
			b, err := json.Marshal(orig)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &restored); err != nil {
				t.Fatal(err)
			}
		}
		a := orig.Update(in(k))
		if k >= 30 {
			if b := restored.Update(in(k)); a != b {
				t.Fatalf("tick %d: restored predictor gave %+v; original %+v", k, b, a)
			}
		}
	}
}

func TestSmithConfigValidate(t *testing.T) {
	if err := (SmithConfig{Kp: 1, Ki: 0.01, Max: 3000, Model: smithPlant}).Validate(); err != nil {
		t.Errorf("Validate(a valid config) = %v; want nil", err)
	}
	bad := smithPlant
	bad.Gain = 0
	if err := (SmithConfig{Kp: 1, Ki: 0.01, Max: 3000, Model: bad}).Validate(); err == nil {
		t.Error("Validate(a model of gain 0) = nil; want an error")
	}
}

// BenchmarkUpdate/smith is one update of the Smith predictor on the
// reference plant's loop model, the figure the bench report sets against
// pkg/control's BenchmarkUpdate/pi of the same run.
func BenchmarkUpdate(b *testing.B) {
	loopModel := smithPlant
	loopModel.DeadTime = 155 * time.Second
	smith := SmithPredictor{Config: SmithConfig{Kp: 2, Ki: 0.02, Min: 0, Max: 3000, Model: loopModel, MeasurementMin: 0, MeasurementMax: 100}}
	b.Run("smith", func(b *testing.B) {
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			smith.Update(control.Input{Setpoint: 70, Measurement: 70 + 5*math.Sin(float64(i)/7),
				MeasurementAge: 90 * time.Second, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute})
			i++
		}
	})
}
