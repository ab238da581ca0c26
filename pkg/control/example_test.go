package control_test

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// A PI controller with conditional anti-windup: CPU below the setpoint
// raises the allowed rate.
func ExampleController() {
	c := control.Controller{Config: control.Config{
		Kp: 2, Ki: 0.05, Min: 0, Max: 3000,
		AntiWindup: control.AntiWindupConditional,
	}}
	out := c.Update(control.Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute})
	fmt.Printf("rate %.0f (P %.0f, I %.0f)\n", out.Rate, out.P, out.I)
	// Output: rate 50 (P 20, I 30)
}

// With reference feedforward the identified model's static inverse sets the
// rate for the (filtered) setpoint at once; the feedback only corrects what
// the model gets wrong.
func ExampleController_feedforward() {
	model := control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	c := control.Controller{Config: control.Config{
		Kp: 1, Ki: 0.05, Min: 0, Max: 3000,
		AntiWindup:  control.AntiWindupConditional,
		Feedforward: &model, DelayAware: true,
	}}
	out := c.Update(control.Input{Setpoint: 70, Measurement: 10, MeasurementAge: 90 * time.Second,
		MeasurementPeriod: time.Minute, SamplingInterval: time.Minute})
	fmt.Printf("rate %.0f (feedforward %.0f)\n", out.Rate, out.FF)
	// Output: rate 1200 (feedforward 1200)
}

// A measurement that is missing never reaches the integrator: the
// controller holds and says so, and the loop applies its stale policy and
// tells the controller what it sent instead (Override), so that the next
// update starts from there.
func ExampleStalePolicy() {
	c := control.Controller{Config: control.Config{Kp: 2, Ki: 0.05, Min: 0, Max: 3000, MeasurementMin: 0, MeasurementMax: 100}}
	c.Update(control.Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute})
	out := c.Update(control.Input{Setpoint: 70, Measurement: -1, SamplingInterval: time.Minute})
	policy := control.StalePolicy{Action: control.StaleFailClosed, SafeRate: 20}
	if out.Held {
		c.Override(policy.Apply(out.Rate, 2*time.Minute, time.Minute))
	}
	fmt.Printf("held %v, rate %.0f\n", out.Held, c.State.Output)
	// Output: held true, rate 20
}

// Override control: one controller per constraint, the lowest output is
// applied, and the controller not selected tracks it (its output is the
// applied rate plus its own proportional action), so that it does not wind
// up and takes over bumplessly when its measurement reaches its setpoint.
func ExampleOverride() {
	cfg := control.Config{Min: 10, Max: 3000, Slew: 100, AntiWindup: control.AntiWindupConditional}
	cpu, lag := cfg, cfg
	cpu.Kp, cpu.Ki = 2, 0.02
	lag.Kp, lag.Ki = 10, 0.03
	o := control.Override{Controllers: map[string]*control.Controller{"cpu": {Config: cpu}, "lag": {Config: lag}}}
	tick := func(cpuNow, lagNow float64) {
		out := o.Update([]control.SignalInput{
			{Name: "cpu", Input: control.Input{Setpoint: 70, Measurement: cpuNow, SamplingInterval: time.Minute}},
			{Name: "lag", Input: control.Input{Setpoint: 10, Measurement: lagNow, SamplingInterval: time.Minute}},
		})
		fmt.Printf("rate %.0f limited by %s (cpu asks %.0f, lag asks %.0f)\n",
			out.Rate, out.Limiting, out.Outputs["cpu"].Rate, out.Outputs["lag"].Rate)
	}
	tick(60, 0)  // both below their setpoints: the CPU asks for the smaller increase (the lag, the slew limit's 10 + 100)
	tick(62, 0)  // the lag, not selected, asks for the applied 32 + Kp e = 132
	tick(63, 11) // the lag is above its setpoint: it takes over and cuts
	// Output:
	// rate 32 limited by cpu (cpu asks 32, lag asks 110)
	// rate 38 limited by cpu (cpu asks 38, lag asks 132)
	// rate 26 limited by lag (cpu asks 44, lag asks 26)
}
