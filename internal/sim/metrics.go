package sim

import (
	"math"
	"time"
)

// SettlingBand is the band around the setpoint, in points, that the true CPU
// must stay within for a transient to count as settled.
const SettlingBand = 2.0

// ViolationMargin is how far above the setpoint, in points, the CPU counts
// as a violation.
const ViolationMargin = 5.0

// Settling holds the settling time after the first event of each kind,
// seconds; nil when the CPU did not settle before the next event or the end.
type Settling struct {
	Start       *float64 `json:"start"`
	Disturbance *float64 `json:"disturbance"`
	Setpoint    *float64 `json:"setpoint"`
}

// Metrics are the measures of a run, all from the plant's true CPU.
type Metrics struct {
	// IAE is the integral of |setpoint - CPU|, point-seconds.
	IAE float64 `json:"iae"`
	// StartOvershoot is the largest excess of CPU over the setpoint before
	// the first event after the start, points (0 when none).
	StartOvershoot float64 `json:"start_overshoot_pp"`
	// ViolationSeconds is the time the CPU spent above setpoint +
	// ViolationMargin.
	ViolationSeconds float64 `json:"violation_s"`
	// Settling are the settling times.
	Settling Settling `json:"settling_s"`
	// Processed and Lost are message counts.
	Processed int64 `json:"processed"`
	Lost      int64 `json:"lost"`
	// MaxCPU is the highest true CPU.
	MaxCPU float64 `json:"max_cpu"`
}

// Measure computes the metrics of series ser of scenario s.
func Measure(s Scenario, ser Series, c Counts) Metrics {
	m := Metrics{Processed: c.Processed, Lost: c.Lost()}
	h := s.step().Seconds()
	ev := s.Events()
	firstAfterStart := s.Duration.Seconds()
	if len(ev) > 1 {
		firstAfterStart = ev[1].At.Seconds()
	}
	for i, t := range ser.T {
		e := ser.CPU[i] - ser.Setpoint[i]
		m.IAE += math.Abs(e) * h
		if t <= firstAfterStart {
			m.StartOvershoot = math.Max(m.StartOvershoot, e)
		}
		if e > ViolationMargin {
			m.ViolationSeconds += h
		}
		m.MaxCPU = math.Max(m.MaxCPU, ser.CPU[i])
	}
	settle := func(kind string) *float64 {
		for i, e := range ev {
			if e.Kind != kind {
				continue
			}
			return settlingTime(ser, e.At, s.eventEnd(ev, i))
		}
		return nil
	}
	m.Settling = Settling{Start: settle("start"), Disturbance: settle("disturbance"), Setpoint: settle("setpoint")}
	return m
}

// settlingTime is the time after from at which the CPU last entered the band
// for good before to; nil if it is outside the band at to.
func settlingTime(ser Series, from, to time.Duration) *float64 {
	f, t := from.Seconds(), to.Seconds()
	lastOut := f
	inside := false
	for i, x := range ser.T {
		if x <= f || x > t {
			continue
		}
		if math.Abs(ser.CPU[i]-ser.Setpoint[i]) > SettlingBand {
			lastOut = x
			inside = false
		} else {
			inside = true
		}
	}
	if !inside {
		return nil
	}
	v := lastOut - f
	return &v
}
