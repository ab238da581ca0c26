package control

import (
	"math"
	"testing"
	"time"
)

// BenchmarkUpdate measures one controller update: a plain PI (the baseline)
// and the thesis's structure (conditional anti-windup, setpoint filter,
// feedforward, delay-aware integrator), both on the reference plant, fed a
// measurement that moves each update. The lab's Smith predictor has its
// own (internal/sim/lab), set against this PI in the bench report.
func BenchmarkUpdate(b *testing.B) {
	plant := FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	input := func(i int) Input {
		return Input{Setpoint: 70, Measurement: 70 + 5*math.Sin(float64(i)/7),
			MeasurementAge: 90 * time.Second, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute}
	}
	ff := plant
	pi := Controller{Config: Config{Kp: 2, Ki: 0.02, Min: 0, Max: 3000}}
	thesis := Controller{Config: Config{Kp: 2, Ki: 0.26, Min: 0, Max: 3000, AntiWindup: AntiWindupConditional,
		SetpointFilter: 60 * time.Second, Feedforward: &ff, DelayAware: true, NoiseBand: 1, MeasurementMin: 0, MeasurementMax: 100}}
	for _, bc := range []struct {
		name   string
		update func(Input) Output
	}{{"pi", pi.Update}, {"pi-aw-spf-ff", thesis.Update}} {
		b.Run(bc.name, func(b *testing.B) {
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				bc.update(input(i))
				i++
			}
		})
	}
}
