package drift

import (
	"math"
	"testing"
	"time"
)

// FuzzUpdate feeds the detector arbitrary datapoints, model and timing:
// it never panics, keeps at most ChangeWindow datapoints in time order,
// records none for a NaN or Inf measurement, and says drift only with a
// reason.
func FuzzUpdate(f *testing.F) {
	f.Add(0.05, 10.0, int64(15), int64(5), 2.0, int64(60), int64(120), 70.0, 0.1, true, false, uint8(20))
	f.Add(0.05, 10.0, int64(0), int64(0), 0.0, int64(0), int64(0), math.NaN(), 0.05, false, true, uint8(3))
	f.Add(1e-9, -5.0, int64(-1), int64(600), -1.0, int64(-60), int64(1), math.Inf(1), 1e9, true, true, uint8(40))
	f.Fuzz(func(t *testing.T, gain, base float64, tauS, deadS int64, nb float64, periodS, ageS int64, y, plantGain float64, fresh, limited bool, ticks uint8) {
		m := Model{Gain: gain, Base: base, Tau: time.Duration(tauS) * time.Second, DeadTime: time.Duration(deadS%3600) * time.Second}
		period := time.Duration(periodS%3600) * time.Second
		// A rate that steps every other minute, so that the tests have a
		// prediction that moves.
		response := func(dead, from, to time.Duration) float64 {
			return float64(200 + 100*((int64(to-dead)/int64(2*time.Minute))%3))
		}
		det := Detector{Config: Config{NoiseBand: nb, TickPeriod: time.Minute}}
		for k := range int(ticks % 48) {
			clock := time.Duration(k+1) * time.Minute
			v := y
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				v = base + plantGain*response(m.DeadTime, clock-period, clock) + math.Sin(float64(k))
			}
			before := len(det.State.Samples)
			det.Update(Input{Model: m, Response: response, Clock: clock, Measurement: v,
				MeasurementAge: time.Duration(ageS%3600) * time.Second, MeasurementPeriod: period,
				Fresh: fresh, Limited: limited && k%5 == 0, Now: time.Unix(int64(60*k), 0)})
			s := det.State
			if (math.IsNaN(v) || math.IsInf(v, 0)) && len(s.Samples) > before {
				t.Fatalf("tick %d: measurement %v recorded: %+v", k, v, s.Samples)
			}
			if len(s.Samples) > ChangeWindow {
				t.Fatalf("tick %d: %d datapoints; want at most %d", k, len(s.Samples), ChangeWindow)
			}
			for i := 1; i < len(s.Samples); i++ {
				if s.Samples[i].End <= s.Samples[i-1].End {
					t.Fatalf("tick %d: datapoints out of order: %+v", k, s.Samples)
				}
			}
			if s.ModelDrift && s.Reason != ReasonGain && s.Reason != ReasonDeadTime {
				t.Fatalf("tick %d: model_drift with reason %q", k, s.Reason)
			}
		}
	})
}
