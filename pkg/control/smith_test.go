package control

import (
	"math"
	"testing"
	"time"
)

func TestSmithPredictorTracksSetpoint(t *testing.T) {
	loop := testModel
	loop.DeadTime = 125 * time.Second // plant 5 s + the test plant's 60 s average + 60 s publication
	c := SmithPredictor{Config: SmithConfig{Ki: 1 / (loop.Gain * 120), Min: 0, Max: 3000, Model: loop}}
	p := newPlant(testModel)
	last, prev := p.cpu(), p.cpu()
	var cpu []float64
	for range 60 {
		out := c.Update(Input{Setpoint: 70, Measurement: prev, SamplingInterval: time.Minute})
		prev = last
		last = p.run(out.Rate, 60)
		cpu = append(cpu, last)
	}
	if e := math.Abs(cpu[len(cpu)-1] - 70); e > 0.5 {
		t.Fatalf("CPU after an hour = %v; want 70 +- 0.5", cpu[len(cpu)-1])
	}
	if os := maxOver(cpu, 0, len(cpu), 70); os > 2 {
		t.Fatalf("overshoot %v points; want at most 2 with an exact model", os)
	}
}

func TestSmithPredictorHoldsOnBadMeasurement(t *testing.T) {
	c := SmithPredictor{Config: SmithConfig{Kp: 1, Ki: 0.01, Min: 0, Max: 3000, Model: testModel, MeasurementMin: 0, MeasurementMax: 100}}
	c.Update(Input{Setpoint: 70, Measurement: 30, SamplingInterval: time.Minute})
	before := c.State
	out := c.Update(Input{Setpoint: 70, Measurement: math.NaN(), SamplingInterval: time.Minute})
	if !out.Held || out.Rate != before.Output || c.State.Integral != before.Integral {
		t.Fatalf("NaN measurement: %+v; want held", out)
	}
}

func TestSmithStateJSONRoundTrip(t *testing.T) {
	cfg := SmithConfig{Kp: 2, Ki: 0.02, Min: 0, Max: 3000, Slew: 300, Model: testModel}
	in := func(k int) Input {
		return Input{Setpoint: 70, Measurement: 50 + 20*math.Sin(float64(k)/5), SamplingInterval: time.Minute}
	}
	wantRestoredAlike[SmithPredictor](t, SmithPredictor{Config: cfg}, in, 30, 80)
}
