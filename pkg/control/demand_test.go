package control

import (
	"math"
	"testing"
	"time"
)

// demandModel is the reference plant: 0.05 points per msg/s over a base of
// 10 %, so 1,200 msg/s hold 70 %.
var demandModel = FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}

func demandConfig(headroom, ceiling float64) Config {
	m := demandModel
	return Config{Kp: 20, Ki: 0.001, Min: 0, Max: 3000, AntiWindup: AntiWindupConditional, Feedforward: &m,
		MeasurementMin: 0, MeasurementMax: 100, DemandConfig: DemandConfig{Headroom: headroom, Ceiling: ceiling}}
}

// idle runs n ticks of an empty queue: the consumers take 400 msg/s, the
// CPU reads 30 %, and returns the last output.
func idle(c *Controller, n int) Output {
	var out Output
	for range n {
		out = c.Update(Input{Setpoint: 70, Measurement: 30, SamplingInterval: time.Minute, ActualRate: 400, ActualKnown: true})
	}
	return out
}

func TestDemandHoldKeepsTheRateNearTheSetpointsRate(t *testing.T) {
	held := Controller{Config: demandConfig(0.5, 0)}
	out := idle(&held, 30)
	// FF + I: the model's 1,200 msg/s; the proportional reaction to the
	// 40 points that the empty queue, not the rate, causes is left out.
	if !out.DemandLimited || math.Abs(out.Rate-1200) > 5 {
		t.Errorf("held rate after 30 idle ticks = %+v; want about 1200 and DemandLimited", out)
	}
	free := Controller{Config: demandConfig(0, 0)}
	if out := idle(&free, 30); out.Rate < 1900 || out.DemandLimited {
		t.Errorf("rate without the hold = %+v; want the proportional reaction on top (about 2000)", out)
	}
}

func TestDemandHoldWithoutFeedforwardFollowsWhatWasTaken(t *testing.T) {
	cfg := Config{Kp: 20, Ki: 0.01, Min: 0, Max: 3000, AntiWindup: AntiWindupConditional, DemandConfig: DemandConfig{Headroom: 0.5}}
	c := Controller{Config: cfg}
	out := idle(&c, 30)
	if !out.DemandLimited || out.Rate > 600+1e-9 {
		t.Errorf("held rate = %+v; want at most 400 x 1.5 = 600 and DemandLimited", out)
	}
}

func TestDemandHoldReleasesWhenTheConsumersTakeTheRate(t *testing.T) {
	c := Controller{Config: demandConfig(0.5, 0)}
	idle(&c, 10)
	out := c.Update(Input{Setpoint: 70, Measurement: 30, SamplingInterval: time.Minute, ActualRate: c.State.Output, ActualKnown: true})
	if out.DemandLimited {
		t.Errorf("Update with the whole rate taken = %+v; want no hold", out)
	}
}

func TestCeilingCutsDecisively(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ceiling float64
		wantCut bool
		maxRate float64
	}{
		{"cut", 95, true, 1200},
		{"off", 0, false, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Controller{Config: demandConfig(0, tc.ceiling)}
			// An operator ran it at 2,800 msg/s; back to auto, the CPU
			// is pinned at 100 %.
			c.Config.Mode, c.Config.ManualRate = ModeManual, 2800
			c.Update(Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute})
			c.Config.Mode = ModeAuto
			var out Output
			for range 3 {
				out = c.Update(Input{Setpoint: 70, Measurement: 100, SamplingInterval: time.Minute})
				if out.Cut != tc.wantCut || out.Rate > tc.maxRate+1e-6 {
					t.Fatalf("Update(100 %%) = %+v; want cut %v and rate at most %v", out, tc.wantCut, tc.maxRate)
				}
			}
			if !tc.wantCut && out.Rate < 2000 {
				t.Errorf("rate without the cut = %v; want the slow PI descent (above 2000)", out.Rate)
			}
			// The integrator tracked the cut: the next datapoint at the
			// setpoint does not bring the old rate back.
			next := c.Update(Input{Setpoint: 70, Measurement: 70, SamplingInterval: time.Minute})
			if tc.wantCut && next.Rate > 1200 {
				t.Errorf("after the cut, Update(70 %%) = %v; want at most the model's 1200 (the integrator tracked the cut)", next.Rate)
			}
		})
	}
}

func TestCeilingCutWithoutModelScalesWhatWasTaken(t *testing.T) {
	c := Controller{Config: Config{Kp: 1, Ki: 0.001, Min: 0, Max: 3000, MeasurementMax: 100, DemandConfig: DemandConfig{Ceiling: 95}}}
	c.State = State{Init: true, Output: 2000, SampleEnd: math.MinInt64, FilteredSetpoint: 70, Kp: 1, Integral: 2000}
	out := c.Update(Input{Setpoint: 70, Measurement: 100, SamplingInterval: time.Minute, ActualRate: 2000, ActualKnown: true})
	if !out.Cut || math.Abs(out.Rate-1400) > 1e-6 {
		t.Errorf("Update(100 %%) = %+v; want the cut to 2000 x 70/100 = 1400", out)
	}
}

func TestValidateDemand(t *testing.T) {
	for _, d := range []DemandConfig{{Headroom: -1}, {Headroom: math.NaN()}, {Ceiling: -5}, {Ceiling: math.Inf(1)}} {
		cfg := demandConfig(0, 0)
		cfg.DemandConfig = d
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil; want an error", d)
		}
	}
}

// Output.ActualLimited says the plant took clearly less than the last
// output, hold or no hold, and a held (invalid) measurement too; the
// whole rate taken is not limited.
func TestActualLimitedSaysTheRateWasMeasured(t *testing.T) {
	for _, headroom := range []float64{0, 0.5} {
		c := Controller{Config: demandConfig(headroom, 0)}
		if out := idle(&c, 3); !out.ActualLimited {
			t.Errorf("headroom %v: idle update = %+v; want ActualLimited", headroom, out)
		}
		out := c.Update(Input{Setpoint: 70, Measurement: math.NaN(), SamplingInterval: time.Minute, ActualRate: 400, ActualKnown: true})
		if !out.Held || !out.ActualLimited {
			t.Errorf("headroom %v: update on a NaN datapoint = %+v; want Held and ActualLimited", headroom, out)
		}
		out = c.Update(Input{Setpoint: 70, Measurement: 30, SamplingInterval: time.Minute, ActualRate: c.State.Output, ActualKnown: true})
		if out.ActualLimited {
			t.Errorf("headroom %v: update with the whole rate taken = %+v; want not ActualLimited", headroom, out)
		}
	}
}
