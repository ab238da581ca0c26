package stepdemo

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// Traffic is the dashboard demo's traffic beside its default cycle: a named
// preset scaled to the demo's plant, and producer changes and bursts (times
// from the demo's start, the prefilled ticks included) that replace the
// preset's when given.
type Traffic struct {
	// Scenario is reference (the default cycle), idle-burst or diurnal.
	Scenario        string
	ProducerChanges []sim.ProducerChange
	Bursts          []sim.Burst
	// Inner runs the consumers' inner loop (PARAMS inner_loop), which the
	// latency chart shows. Its stores take virtual time, and where one
	// straddles a step depends on the goroutines' timing: a demo with it is
	// not exactly repeatable from its seed.
	Inner bool
}

// apply sets s's traffic. The demo's plant takes 120 msg/s at the 70 %
// setpoint (a tenth of the reference's 1,200): idle-burst has producers at
// 40 msg/s with no backlog and no disturbance, and 30,000 messages at minute
// 60 of every cycle; diurnal repeats a day's curve from 30 to 150 msg/s
// every cycle, crossing the capacity twice, with 20,000 messages at minute
// 45.
func (tr Traffic) apply(s *sim.Scenario) error {
	switch tr.Scenario {
	case "", sim.PresetReference:
	case sim.PresetIdleBurst:
		s.ProducerRate, s.Backlog, s.Disturbances = 40, 0, nil
		s.Bursts = everyCycle(func(at time.Duration) []sim.Burst { return []sim.Burst{{At: at + 60*time.Minute, N: 30_000}} })
	case sim.PresetDiurnal:
		s.Backlog, s.Disturbances = 0, nil
		d, err := sim.Preset(sim.PresetDiurnal)
		if err != nil {
			return err
		}
		scale := cycle.Seconds() / d.Duration.Seconds()
		for c := range cycles {
			at := time.Duration(c) * cycle
			for _, pc := range d.ProducerChanges {
				s.ProducerChanges = append(s.ProducerChanges, sim.ProducerChange{At: at + time.Duration(float64(pc.At)*scale), Rate: pc.Rate / 10})
			}
			s.Bursts = append(s.Bursts, sim.Burst{At: at + 45*time.Minute, N: 20_000})
		}
		s.ProducerRate = s.ProducerChanges[0].Rate
	default:
		return fmt.Errorf("demo scenario %q: want %s, %s or %s", tr.Scenario, sim.PresetReference, sim.PresetIdleBurst, sim.PresetDiurnal)
	}
	if tr.ProducerChanges != nil {
		s.ProducerChanges = tr.ProducerChanges
	}
	if tr.Bursts != nil {
		s.Bursts = tr.Bursts
	}
	return s.Validate()
}

func everyCycle(f func(at time.Duration) []sim.Burst) []sim.Burst {
	var out []sim.Burst
	for c := range cycles {
		out = append(out, f(time.Duration(c)*cycle)...)
	}
	return out
}
