package control

import (
	"math"
	"testing"
	"time"
)

// BenchmarkUpdate measures one controller update: a plain PI (the baseline),
// the thesis's structure (conditional anti-windup, setpoint filter,
// feedforward, delay-aware integrator) and the Smith predictor, all on the
// reference plant's loop model, fed a measurement that moves each update.
func BenchmarkUpdate(b *testing.B) {
	plant := FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	loopModel := plant
	loopModel.DeadTime = 155 * time.Second
	input := func(i int) Input {
		return Input{Setpoint: 70, Measurement: 70 + 5*math.Sin(float64(i)/7),
			MeasurementAge: 90 * time.Second, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute}
	}
	ff := plant
	pi := Controller{Config: Config{Kp: 2, Ki: 0.02, Min: 0, Max: 3000}}
	thesis := Controller{Config: Config{Kp: 2, Ki: 0.26, Min: 0, Max: 3000, AntiWindup: AntiWindupConditional,
		SetpointFilter: 60 * time.Second, Feedforward: &ff, DelayAware: true, NoiseBand: 1, MeasurementMin: 0, MeasurementMax: 100}}
	smith := SmithPredictor{Config: SmithConfig{Kp: 2, Ki: 0.02, Min: 0, Max: 3000, Model: loopModel, MeasurementMin: 0, MeasurementMax: 100}}
	for _, bc := range []struct {
		name   string
		update func(Input) Output
	}{{"pi", pi.Update}, {"pi-aw-spf-ff", thesis.Update}, {"smith", smith.Update}} {
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
