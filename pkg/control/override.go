package control

import (
	"math"
	"time"
)

// Override is override (selector) control over several constraints: one
// Controller per signal (CPU, replication lag, latency), each with its own
// setpoint and gains, and the actuator gets the lowest of their outputs
// (Astrom & Hagglund, Advanced PID Control, 2006, sec. 3.6 "Selector
// control"; Shinskey, Process Control Systems, 1996, ch. 6).
//
// The controllers that are not selected track the rate really applied by
// external reset feedback: after each update the integrator of every
// controller that was not selected is reset so that its output is the
// applied rate plus its own proportional and derivative action (u = applied
// + Kp e + D, the position form of Shinskey's external reset). A constraint
// far below its setpoint (e > 0) therefore asks for more than is applied by
// Kp e + D and no more, whatever time passes: its integrator does not wind
// up while another signal limits; and it takes over when its error turns
// negative (its measurement crosses the setpoint) or, with a derivative
// gain, earlier, when its measurement rises toward the setpoint fast
// enough (Kd times its slope above Kp e), from the rate in force, so that
// the hand-over is bumpless; the controller that takes over keeps its
// derivative term's correction in its integrator (keepDerivative), so that
// the rate does not return to the rate in force before the hand-over once
// the measurement stops moving. Every controller is also told the applied rate
// (Controller.Override), so that its slew limit and its delay-aware
// prediction start from what was really sent. A controller on a measured
// feedforward (Input.Feedforward) does not track: it asks for the measured
// rate plus its own terms whether it limits or not (measuredFeedforward).
//
// Override is plain data: Controllers and Limiting round-trip through
// encoding/json like a Controller.
type Override struct {
	// Controllers are the signals' controllers by name.
	Controllers map[string]*Controller `json:"controllers"`
	// Limiting is the name of the signal whose output was applied at the
	// last update ("" before the first).
	Limiting string `json:"limiting,omitempty"`
	// Asked is what each signal asked for at the last update (its
	// Output.Rate). A signal whose controller holds asks for what its
	// stale policy makes of it: hold keeps asking the same, so that a
	// signal that did not limit does not start limiting because it went
	// blind. Missing: the controller's last output.
	Asked map[string]float64 `json:"asked,omitempty"`
}

// SignalInput is one signal's input to an Override update.
type SignalInput struct {
	// Name is the signal's name, a key of Override.Controllers.
	Name string
	// Input is its controller's input (Measurement NaN when missing).
	Input Input
	// Stale is what the signal allows while its controller holds (an
	// unusable measurement): Stale.Apply of the held rate, StaleFor and
	// Input.SamplingInterval. The zero value holds.
	Stale StalePolicy
	// StaleFor is how long the measurement has been unusable, this update
	// included.
	StaleFor time.Duration
	// AtFloor says the measurement sits at the floor of its range: a
	// replication lag of 0 says only that the replica keeps up, not how far
	// the rate is from making it fall behind. The signal then asks for as
	// much as its slew limit allows (up to Max) and limits the rate only
	// when every signal is at its floor, and its controller
	// tracks the applied rate as one not selected does; it takes part again
	// from the applied rate once its measurement leaves the floor.
	AtFloor bool
}

// OverrideOutput is the result of an Override update.
type OverrideOutput struct {
	// Rate is the applied rate: the lowest of the signals' outputs.
	Rate float64 `json:"rate"`
	// Limiting names the signal whose output was applied.
	Limiting string `json:"limiting"`
	// Outputs are each signal's own output, before the selection (Rate is
	// what that signal asked for; for a held signal, what its stale policy
	// allows).
	Outputs map[string]Output `json:"outputs"`
}

// Update runs every signal's controller on its own input, applies the
// lowest output, and makes the controllers that were not selected track it.
// A signal whose controller holds (Output.Held) asks for what its stale
// policy makes of what it asked at the last update (Asked); one at the floor
// of its range (SignalInput.AtFloor) asks for as much as its slew limit
// allows and limits only when every signal is at its floor. On a tie the signal that limited at the last update keeps
// limiting, else the first in the order of in. Inputs whose name has no
// controller are ignored; with no usable input the rate is NaN and
// Limiting "".
func (o *Override) Update(in []SignalInput) OverrideOutput {
	res := OverrideOutput{Rate: math.NaN(), Outputs: make(map[string]Output, len(in))}
	integral := make(map[string]float64, len(in))
	for _, s := range in {
		c := o.Controllers[s.Name]
		if c == nil {
			continue
		}
		// What a measured feedforward's controller not selected keeps:
		// its integrator, or 0 when the measure appears.
		integral[s.Name] = c.State.Integral
		if c.State.FF == 0 {
			integral[s.Name] = 0
		}
		prev := c.State.Output
		if !c.State.Init {
			prev = c.Config.Min
		}
		out := c.Update(s.Input)
		if s.AtFloor && !out.Held {
			out.Rate = limit(c.Config.Max, prev, &c.Config)
		}
		if out.Held {
			last := out.Rate
			if a, ok := o.Asked[s.Name]; ok && !math.IsNaN(a) {
				last = clamp(a, c.Config.Min, c.Config.Max)
			}
			out.Rate = s.Stale.Apply(last, s.StaleFor, s.Input.SamplingInterval)
		}
		res.Outputs[s.Name] = out
	}
	o.selectLowest(&res, in)
	if res.Limiting == "" {
		return res
	}
	o.Asked = make(map[string]float64, len(res.Outputs))
	for _, s := range in {
		if out, ok := res.Outputs[s.Name]; ok {
			o.Asked[s.Name] = out.Rate
			selected := s.Name == res.Limiting && !s.AtFloor
			c := o.Controllers[s.Name]
			if !selected && c.measuredFeedforward(s.Input) {
				// It asks for the measured rate plus its own terms
				// whatever is applied: no tracking, and its integrator
				// (what the measure misses) waits while it does not limit.
				c.State.Integral = integral[s.Name]
				c.Override(res.Rate)
				continue
			}
			c.trackSelected(res.Rate, out, selected)
			if selected && o.Limiting != "" && o.Limiting != s.Name {
				c.keepDerivative(out)
			}
		}
	}
	o.Limiting = res.Limiting
	return res
}

// selectLowest sets res.Rate and res.Limiting: the lowest output of the
// signals off their floor (of all signals when every one is at its floor),
// on a tie the signal that limited at the last update, else the first in
// the order of in. A signal at its floor asks for as much as the slew limit
// allows from its own last output, which says nothing of how far the rate
// may rise: it does not take the rate, nor the label, from a signal that
// measures something.
func (o *Override) selectLowest(res *OverrideOutput, in []SignalInput) {
	off := false
	for _, s := range in {
		if _, ok := res.Outputs[s.Name]; ok && !s.AtFloor {
			off = true
		}
	}
	for _, s := range in {
		out, ok := res.Outputs[s.Name]
		if !ok || (off && s.AtFloor) {
			continue
		}
		if math.IsNaN(res.Rate) || out.Rate < res.Rate || (out.Rate == res.Rate && s.Name == o.Limiting) {
			res.Rate, res.Limiting = out.Rate, s.Name
		}
	}
}

// keepDerivative is a hand-over's memory of the derivative: the controller
// that takes over applies its integrator (the rate applied, which it
// tracked), its proportional and its derivative terms. Its derivative,
// Kd times the measurement's slope, says by how much the rate in force is
// off (for a replication lag, an integrating process, the rate's excess
// over what the replica applies); once the measurement stops moving that
// term is back at 0, and an integrator that still held the rate in force
// would ask for it again. The integrator therefore takes the derivative
// term in at the hand-over (within the output bounds): the rate applied at
// the hand-over is unchanged (bumpless), and what the derivative took back
// stays taken back.
func (c *Controller) keepDerivative(out Output) {
	if out.Held || out.D == 0 || c.Config.Mode == ModeManual {
		return
	}
	c.State.Integral = clamp(c.State.Integral+out.D, c.Config.Min-out.FF, c.Config.Max-out.FF)
}

// measuredFeedforward reports whether c runs on a measured feedforward
// (Input.Feedforward, without a model): the rate that holds its signal
// steady is measured, so it asks for that rate plus its proportional,
// integral and derivative terms whether it limits or not. A controller not
// selected does not track the applied rate (external reset feedback would
// make it ask for the rate in force plus its terms, and take over only once
// its measurement crossed the setpoint, from a rate already above what
// holds it); its integrator holds only what the measure misses and does not
// integrate while another signal limits (no windup). It takes over, from
// the lowest request as any signal, once the measured rate plus its terms
// is below the others': for a replication lag, as soon as the rate in force
// is more than its proportional term above the replica's pace.
func (c *Controller) measuredFeedforward(in Input) bool {
	return in.FeedforwardKnown && c.Config.Feedforward == nil && c.Config.Mode != ModeManual
}

// trackSelected is the external reset feedback of a controller under
// override: it records the applied rate u as what was sent (Override), and
// a controller that was not selected and did not hold resets its integrator
// so that FF + I = u: its output is then u plus its proportional and
// derivative terms, so that a derivative keeps anticipating (resetting to u
// - FF - D cancelled a steady slope's D at the next update). A selected
// controller keeps its integrator.
func (c *Controller) trackSelected(u float64, out Output, selected bool) {
	if !selected && !out.Held && c.Config.Mode != ModeManual {
		c.State.Integral = finite(u-out.FF, c.State.Integral)
	}
	c.Override(u)
}
