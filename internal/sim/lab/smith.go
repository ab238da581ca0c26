package lab

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// SmithConfig configures a SmithPredictor: a PI controller designed for the
// delay-free part of an FOPDT model, whose measurement is corrected by the
// model's prediction (O. J. M. Smith, "Closer control of loops with dead
// time", Chem. Eng. Prog. 53, 1957; Astrom & Hagglund, Advanced PID Control,
// 2006, sec. 7.4). Integration is conditional (anti-windup). The lab
// compares it with the product's controller (pkg/control), which leans on
// a delay-aware integrator instead.
type SmithConfig struct {
	// Kp is the proportional gain, (msg/s) per point.
	Kp float64 `json:"kp"`
	// Ki is the integral gain, (msg/s) per point-second.
	Ki float64 `json:"ki"`
	// Min and Max bound the output; Slew limits its increase per update.
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Slew float64 `json:"slew,omitempty"`
	// Model is the plant model. Its DeadTime must be the loop's total dead
	// time: plant dead time plus the measurement and sampling delays.
	Model control.FOPDT `json:"model"`
	// MeasurementMin and MeasurementMax are the valid measurement range
	// (ignored when Max <= Min).
	MeasurementMin float64 `json:"ymin,omitempty"`
	MeasurementMax float64 `json:"ymax,omitempty"`
}

// Validate reports whether c can drive a SmithPredictor.
func (c SmithConfig) Validate() error {
	if err := c.pid().Validate(); err != nil {
		return err
	}
	if err := c.Model.Validate(); err != nil {
		return fmt.Errorf("smith predictor model: %w", err)
	}
	return nil
}

// pid is c as the PID controller's configuration: its gains, bounds and
// measurement range.
func (c SmithConfig) pid() control.Config {
	return control.Config{Kp: c.Kp, Ki: c.Ki, Min: c.Min, Max: c.Max, Slew: c.Slew,
		MeasurementMin: c.MeasurementMin, MeasurementMax: c.MeasurementMax}
}

// SmithState is the memory of a SmithPredictor; it round-trips through
// encoding/json exactly.
type SmithState struct {
	Init     bool          `json:"init"`
	Clock    time.Duration `json:"clock"`
	Integral float64       `json:"i"`
	Output   float64       `json:"u"`
	// SampleEnd is the Clock instant at which the last integrated
	// measurement's averaging period ended.
	SampleEnd time.Duration `json:"se"`
	// History is the output applied to the plant, oldest first.
	History []control.Segment `json:"hist,omitempty"`
}

// SmithPredictor is a PI controller with a Smith predictor.
type SmithPredictor struct {
	Config SmithConfig `json:"config"`
	State  SmithState  `json:"state"`
}

// Update runs one sampling period. As with control.Controller, an invalid
// measurement holds the output and reports Held, and a datapoint that is not
// newer than the last integrated one is not integrated again.
func (c *SmithPredictor) Update(in control.Input) control.Output {
	cfg, s := &c.Config, &c.State
	dt := max(in.SamplingInterval, 0)
	m := cfg.Model
	valid := (control.Config{MeasurementMin: cfg.MeasurementMin, MeasurementMax: cfg.MeasurementMax}).ValidMeasurement(in.Measurement) &&
		!math.IsNaN(in.Setpoint) && !math.IsInf(in.Setpoint, 0)
	if !s.Init {
		c.start(in, valid)
	}
	s.Clock += dt
	if !valid {
		return control.Output{Rate: s.Output, I: s.Integral, Held: true}
	}
	// Predicted measurement: y + model(no delay) - model(delayed). Expected
	// over an empty window is the lagged history at its end.
	noDelay := m
	noDelay.DeadTime = 0
	fast := m.Base + m.Gain*noDelay.Expected(s.History, s.Clock, s.Clock)
	slow := m.Base + m.Gain*m.Expected(s.History, s.Clock, s.Clock)
	e := in.Setpoint - (in.Measurement + fast - slow)

	sampleEnd := s.Clock - in.MeasurementAge
	timed := in.MeasurementAge != 0 || in.MeasurementPeriod != 0
	isNew := !timed || sampleEnd > s.SampleEnd
	dtI := dt
	if isNew && in.MeasurementPeriod > 0 {
		dtI = in.MeasurementPeriod
	}
	if isNew && timed && s.SampleEnd != math.MinInt64 {
		dtI = min(sampleEnd-s.SampleEnd, max(dt, in.MeasurementPeriod))
	}
	out := control.Output{Reference: in.Setpoint, Error: e, P: cfg.Kp * e}
	integral, u, v := c.integrate(&out, e, isNew, dtI)
	s.Integral, s.Output = integral, u
	if isNew {
		s.SampleEnd = sampleEnd
	}
	s.History = control.AppendSegment(s.History, control.Segment{At: s.Clock, Value: u},
		s.Clock-max(m.DeadTime+6*m.Tau+2*dt, 30*time.Minute))
	out.I, out.Rate, out.Saturated = integral, u, u != v
	return out
}

// start initializes the state on the first update: the output that holds
// a valid measurement on the model, else Min, as if held for an hour.
func (c *SmithPredictor) start(in control.Input, valid bool) {
	cfg, s := &c.Config, &c.State
	s.Init = true
	u0 := cfg.Min
	if valid {
		u0 = limitRate(cfg.Model.Input(in.Measurement), math.Inf(1), cfg)
	}
	s.Output, s.Integral = u0, u0
	s.History = []control.Segment{{At: -time.Hour, Value: u0}}
	s.SampleEnd = math.MinInt64
}

// integrate adds Ki e dtI to the integrator for a new datapoint, unless the
// output then saturates in the error's direction (conditional
// integration), and returns the integrator, the bounded output and the
// output before the bounds.
func (c *SmithPredictor) integrate(out *control.Output, e float64, isNew bool, dtI time.Duration) (integral, u, v float64) {
	cfg, s := &c.Config, &c.State
	integral = s.Integral
	if isNew && cfg.Ki != 0 {
		integral += cfg.Ki * e * dtI.Seconds()
		out.Integrated = true
	}
	v = out.P + integral
	u = limitRate(v, s.Output, cfg)
	if out.Integrated && u != v && (v > u) == (e > 0) {
		integral = s.Integral
		out.Integrated = false
		v = out.P + integral
		u = limitRate(v, s.Output, cfg)
	}
	if math.IsNaN(integral) || math.IsInf(integral, 0) {
		integral = s.Integral
	}
	if math.IsNaN(u) {
		u = s.Output
	}
	return integral, u, v
}

// limitRate applies the slew limit above prev (increases only), then the
// bounds; NaN becomes Min.
func limitRate(v, prev float64, c *SmithConfig) float64 {
	if c.Slew > 0 {
		v = math.Min(v, prev+c.Slew)
	}
	if math.IsNaN(v) {
		return c.Min
	}
	return math.Max(c.Min, math.Min(c.Max, v))
}
