package drift_test

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/drift"
)

// A plant whose gain doubled: the model says 0.05 points per message/s,
// the plant answers 0.1. Once the rate moves, the residual follows it and
// the detector says the gain moved, and by how much.
func Example() {
	model := drift.Model{Gain: 0.05, Base: 10}
	rates := []float64{400, 400, 400, 350, 300, 250, 220, 200, 200, 200, 250, 300} // one a minute
	// The model's unit answer: no lag, so the rate of the minute the
	// period covers, delayed by dead.
	rate := func(t time.Duration) float64 {
		return rates[min(max(int(t/time.Minute), 0), len(rates)-1)]
	}
	response := func(dead, from, to time.Duration) float64 {
		const n = 60
		sum := 0.0
		for k := range n {
			sum += rate(from - dead + (to-from)*time.Duration(2*k+1)/(2*n))
		}
		return sum / n
	}
	det := drift.Detector{Config: drift.Config{NoiseBand: 1.5, TickPeriod: time.Minute}}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for k := 1; k <= len(rates); k++ {
		det.Update(drift.Input{
			Model:    model,
			Response: response,
			Clock:    time.Duration(k) * time.Minute,
			// The datapoint of the minute that just ended, from the plant.
			Measurement:       10 + 0.1*rates[k-1],
			MeasurementPeriod: time.Minute,
			Fresh:             true,
			Now:               start.Add(time.Duration(k) * time.Minute),
		})
		if det.State.ModelDrift {
			fmt.Printf("minute %d: model_drift, %s, plant gain / model gain %.2f\n", k, det.State.Reason, det.State.GainRatio)
			break
		}
	}
	// Output: minute 6: model_drift, gain, plant gain / model gain 2.00
}
