package control

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// runAdaptive closes a loop around a plant y = 10 + gain x (the rate of the
// previous minute), read every minute as a 60-s average that ended at the
// tick, with the setpoint stepping from 50 to 70 at 10 min, and returns the
// controller after 40 min.
func runAdaptive(gain float64) Controller {
	m := FOPDT{Gain: 0.05, Base: 10}
	c := Controller{Config: Config{Kp: 1, Ki: 1 / (0.05 * 60), Max: 3000, AntiWindup: AntiWindupConditional,
		Feedforward: &m, DelayAware: true, AdaptGain: true, MeasurementMax: 100}}
	u, y := 0.0, 10.0
	for k := 0; k < 40; k++ {
		sp := 50.0
		if k >= 10 {
			sp = 70
		}
		u = c.Update(Input{Setpoint: sp, Measurement: y, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute}).Rate
		y = math.Min(100, 10+gain*u)
	}
	return c
}

func TestAdaptGainFollowsThePlant(t *testing.T) {
	for _, g := range []float64{0.1, 0.025} {
		c := runAdaptive(g)
		if got := c.State.Adapt.Scale; math.Abs(got-g/0.05) > 0.05*g/0.05 {
			t.Errorf("plant gain %v: scale %v; want %v", g, got, g/0.05)
		}
		if y := 10 + g*c.State.Output; math.Abs(y-70) > 0.5 {
			t.Errorf("plant gain %v: CPU %.2f at the end; want 70", g, y)
		}
	}
	// The model is right: the scale never moves.
	if c := runAdaptive(0.05); c.State.Adapt.Scale != 0 {
		t.Errorf("exact model: scale %v; want 0 (not adapted)", c.State.Adapt.Scale)
	}
}

func TestAdaptGainNeedsDelayAware(t *testing.T) {
	m := FOPDT{Gain: 0.05}
	if err := (Config{Max: 1, Feedforward: &m, AdaptGain: true}).Validate(); err == nil {
		t.Fatal("AdaptGain without DelayAware accepted")
	}
}

// A plant whose gain is twice the model's: the controller learns it from
// the setpoint step and holds the setpoint at the rate the plant needs.
func ExampleConfig_adaptGain() {
	c := runAdaptive(0.1)
	fmt.Printf("gain scale %.2f, rate %.0f msg/s, CPU %.1f %%\n", c.State.Adapt.Scale, c.State.Output, 10+0.1*c.State.Output)
	// Output: gain scale 2.00, rate 600 msg/s, CPU 70.0 %
}
