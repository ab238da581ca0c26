package sim

import "math"

// SignalMetrics are the measures of one plant output (the CPU, the replica's
// lag) in a run, from its true value.
type SignalMetrics struct {
	Name string `json:"name"`
	// Setpoint is the signal's setpoint at the start; Band the band above it
	// that counts as held (SettlingBand for the CPU).
	Setpoint float64 `json:"setpoint"`
	Band     float64 `json:"band"`
	// SettleS is when the run counts as settled: a third of its duration.
	SettleS float64 `json:"settle_s"`
	// MeanAfterSettle is the signal's mean after SettleS.
	MeanAfterSettle float64 `json:"mean_after_settle"`
	// Max is its highest value.
	Max float64 `json:"max"`
	// IAELimiting is the integral of |setpoint - value| while the signal set
	// the rate; LimitingS how long that was, seconds.
	IAELimiting float64 `json:"iae_limiting"`
	LimitingS   float64 `json:"limiting_s"`
	// AboveBandS is the time the signal spent above setpoint + band.
	AboveBandS float64 `json:"above_band_s"`
}

// SignalMeasures measures each output of scenario s in series ser: the CPU
// and, with a replica, the lag. A signal limits where ser.Limiting names it;
// without Limiting (a policy on the CPU alone) the CPU limits throughout.
func SignalMeasures(s Scenario, ser Series) []SignalMetrics {
	out := []SignalMetrics{measureSignal(s, SignalCPU, SettlingBand, ser.CPU, ser.Setpoint, ser)}
	if r := s.Replica; r != nil && len(ser.Lag) == len(ser.T) {
		sp := make([]float64, len(ser.T))
		for i := range sp {
			sp[i] = r.Setpoint
		}
		out = append(out, measureSignal(s, SignalLag, r.Band, ser.Lag, sp, ser))
	}
	return out
}

func measureSignal(s Scenario, name string, band float64, y, sp []float64, ser Series) SignalMetrics {
	h := s.step().Seconds()
	m := SignalMetrics{Name: name, Band: band, SettleS: s.Duration.Seconds() / 3, Max: math.Inf(-1)}
	if len(sp) > 0 {
		m.Setpoint = sp[0]
	}
	sum, n := 0.0, 0
	for i, t := range ser.T {
		m.Max = math.Max(m.Max, y[i])
		if t > m.SettleS {
			sum += y[i]
			n++
		}
		if limits(ser, i, name) {
			m.IAELimiting += math.Abs(sp[i]-y[i]) * h
			m.LimitingS += h
		}
		if y[i] > sp[i]+band {
			m.AboveBandS += h
		}
	}
	if n > 0 {
		m.MeanAfterSettle = sum / float64(n)
	}
	if math.IsInf(m.Max, -1) {
		m.Max = 0
	}
	return m
}

// limits reports whether signal name set the rate at step i of ser.
func limits(ser Series, i int, name string) bool {
	if ser.Limiting == nil {
		return name == SignalCPU
	}
	return ser.Limiting[i] == name
}

// LimitingSwitches counts the changes of the limiting signal in ser.
func LimitingSwitches(ser Series) int {
	n := 0
	for i := 1; i < len(ser.Limiting); i++ {
		if ser.Limiting[i] != ser.Limiting[i-1] {
			n++
		}
	}
	return n
}
