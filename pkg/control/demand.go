package control

import (
	"fmt"
	"math"
)

// DemandConfig configures how the controller treats a plant that takes less
// than it is allowed (an empty queue) and a measurement at its ceiling. Both
// are off at their zero values.
type DemandConfig struct {
	// Headroom, when positive, holds the output of a demand-limited loop
	// (Input.ActualRate clearly below the last output) at most at
	// max(ActualRate x (1 + Headroom), FF + I): the rate that was taken with
	// headroom, or the controller's own estimate of the rate that holds
	// the setpoint (the feedforward and the integral, without the
	// proportional and derivative reaction to an error that the demand, not
	// the rate, caused). A burst that ends the idle period then starts from
	// there, not from Max. This is the idea of TCP's congestion window
	// validation for application-limited periods (RFC 7661): a sender that
	// did not use its window has not shown that the path takes it.
	Headroom float64 `json:"hr,omitempty"`
	// Ceiling, when positive, is the measurement at or above which the
	// measurement no longer shows how far the plant is overloaded (a CPU
	// pinned at 100 %). A new datapoint at or above it (and above the
	// setpoint) cuts the output at once to the rate that was applied
	// during the datapoint's period scaled by (r - b)/(y - b), where r is
	// the setpoint, y the datapoint and b the model's base load (0
	// without feedforward): by the linear model, the most the plant can
	// take at the setpoint, since y understates the load. The integrator
	// tracks the cut output, so the loop continues from it bumplessly.
	Ceiling float64 `json:"ceil,omitempty"`
}

// validateDemand checks the demand settings of c.
func (c Config) validateDemand() error {
	if math.IsNaN(c.Headroom) || math.IsInf(c.Headroom, 0) || c.Headroom < 0 || c.Headroom > 100 {
		return fmt.Errorf("headroom %v: must be a number in [0, 100]", c.Headroom)
	}
	if math.IsNaN(c.Ceiling) || math.IsInf(c.Ceiling, 0) || c.Ceiling < 0 {
		return fmt.Errorf("ceiling %v: must be a finite number >= 0", c.Ceiling)
	}
	return nil
}

// demandStep is what applyDemand works on: the update's output before the
// demand rules, and what they need to know.
type demandStep struct {
	u       float64 // the output after the integrator and the bounds
	y       float64 // the measurement used
	fresh   bool    // a new, valid datapoint
	limited bool    // the plant took clearly less than the last output
}

// applyDemand applies the ceiling cut, then the demand-limited hold, to one
// update whose integrator already ran (see DemandConfig), and returns the
// output. A cut moves the integrator to track the cut output.
func (c *Controller) applyDemand(out *Output, d demandStep, in Input) float64 {
	cfg, s := &c.Config, &c.State
	u := d.u
	if cfg.Ceiling > 0 && d.fresh && d.y >= cfg.Ceiling && d.y > s.FilteredSetpoint {
		if bound := c.ceilingBound(d.y, in); u > bound {
			u = clamp(bound, cfg.Min, cfg.Max)
			s.Integral = finite(u-out.FF-out.P-out.D, s.Integral) // track: continue from the cut
			out.Cut = true
		}
	}
	if cfg.Headroom > 0 && d.limited && !out.Cut {
		hold := math.Max(in.ActualRate*(1+cfg.Headroom), out.FF+s.Integral)
		if u > hold {
			u = clamp(hold, cfg.Min, cfg.Max)
			out.DemandLimited = true
		}
	}
	if u != d.u {
		out.Saturated = true
	}
	out.I, out.Rate = s.Integral, u
	return u
}

// ceilingBound is the most the plant can take at the setpoint, by the linear
// model, given that it was at or above y while receiving the rate applied
// during the datapoint's period.
func (c *Controller) ceilingBound(y float64, in Input) float64 {
	cfg, s := &c.Config, &c.State
	seen := s.Output
	switch {
	case cfg.DelayAware && cfg.Feedforward != nil && len(s.Applied) > 0:
		end := s.Clock - in.MeasurementAge
		seen = cfg.Feedforward.expected(s.Applied, end-in.MeasurementPeriod, end)
	case in.ActualKnown && !math.IsNaN(in.ActualRate):
		seen = in.ActualRate
	}
	base := 0.0
	if m := cfg.Feedforward; m != nil && m.Base < s.FilteredSetpoint {
		base = m.Base
	}
	bound := math.Max(0, seen) * (s.FilteredSetpoint - base) / (y - base)
	if m := cfg.Feedforward; m != nil {
		// The model's own rate at the setpoint: the measurement gives
		// only a bound, the model an estimate.
		bound = math.Min(bound, m.Input(s.FilteredSetpoint))
	}
	return bound
}
