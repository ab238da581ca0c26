package sim

import (
	"fmt"
	"math"
	"time"
)

// ProducerChange sets the producers' rate to Rate messages/s from At.
type ProducerChange struct {
	At   time.Duration `json:"at"`
	Rate float64       `json:"rate"`
}

// Burst enqueues N messages at once at At (a batch job, a replay).
type Burst struct {
	At time.Duration `json:"at"`
	N  int64         `json:"n"`
}

// ProducerRateAt returns the producers' rate in force at t: ProducerRate,
// or the latest ProducerChange at or before t.
func (s Scenario) ProducerRateAt(t time.Duration) float64 {
	return inForce(s.ProducerRate, s.ProducerChanges, t, func(c ProducerChange) (time.Duration, float64) { return c.At, c.Rate })
}

// BurstsIn returns the number of messages the bursts enqueue in [from, to).
func (s Scenario) BurstsIn(from, to time.Duration) int64 {
	var n int64
	for _, b := range s.Bursts {
		if b.At >= from && b.At < to {
			n += b.N
		}
	}
	return n
}

// validateTraffic checks the producer changes and the bursts.
func (s Scenario) validateTraffic() error {
	for _, c := range s.ProducerChanges {
		if c.At < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) || c.Rate < 0 || c.Rate > 1e9 {
			return fmt.Errorf("producer change %v=%v: time must be >= 0 and rate in [0, 1e9] messages/s", c.At, c.Rate)
		}
	}
	for _, b := range s.Bursts {
		if b.At < 0 || b.N < 0 || b.N > 1e12 {
			return fmt.Errorf("burst %v=%d: time must be >= 0 and size in [0, 1e12] messages", b.At, b.N)
		}
	}
	return nil
}

// Scenario presets for Preset.
const (
	PresetReference = "reference"
	PresetIdleBurst = "idle-burst"
	PresetDiurnal   = "diurnal"
	PresetReplica   = "replica-lag"
)

// Presets lists the named scenarios, in the order of the docs.
func Presets() []string {
	return []string{PresetReference, PresetIdleBurst, PresetDiurnal, PresetReplica}
}

// Preset returns the named scenario: reference (docs/lab.md's reference
// scenario), idle-burst (producers at 400 msg/s with no backlog, 300,000
// messages at once at 60 min, no setpoint change, no disturbance, 120 min)
// or diurnal (a day's traffic curve compressed into four hours, crossing the
// destination's capacity at the setpoint twice, with a burst on top) or
// replica-lag (ReplicaLagScenario).
func Preset(name string) (Scenario, error) {
	s := Reference()
	switch name {
	case PresetReference:
	case PresetIdleBurst:
		s.ProducerRate, s.Backlog = 400, 0
		s.Bursts = []Burst{{At: 60 * time.Minute, N: 300_000}}
		s.SetpointChanges, s.Disturbances = nil, nil
		s.Duration = 120 * time.Minute
	case PresetDiurnal:
		s.Backlog = 0
		s.SetpointChanges, s.Disturbances = nil, nil
		s.Duration = 240 * time.Minute
		s.ProducerChanges = diurnalCurve(s.Duration, 10*time.Minute, 300, 1500)
		s.ProducerRate = s.ProducerChanges[0].Rate
		s.Bursts = []Burst{{At: 45 * time.Minute, N: 200_000}}
	case PresetReplica:
		s = ReplicaLagScenario()
	default:
		return Scenario{}, fmt.Errorf("scenario %q: want one of %v", name, Presets())
	}
	return s, nil
}

// diurnalCurve is a day's traffic compressed into d: a raised cosine from
// low (night) to high (the afternoon peak) and back, in steps of every.
func diurnalCurve(d, every time.Duration, low, high float64) []ProducerChange {
	var out []ProducerChange
	for t := time.Duration(0); t < d; t += every {
		mid := (t + every/2).Seconds() / d.Seconds()
		r := low + (high-low)*(1-math.Cos(2*math.Pi*mid))/2
		out = append(out, ProducerChange{At: t, Rate: math.Round(r)})
	}
	return out
}
