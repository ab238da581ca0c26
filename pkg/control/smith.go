package control

import (
	"fmt"
	"math"
	"time"
)

// SmithConfig configures a SmithPredictor: a PI controller designed for the
// delay-free part of an FOPDT model, whose measurement is corrected by the
// model's prediction (O. J. M. Smith, "Closer control of loops with dead
// time", Chem. Eng. Prog. 53, 1957; Astrom & Hagglund, Advanced PID Control,
// 2006, sec. 7.4). Integration is conditional (anti-windup).
type SmithConfig struct {
	// Kp is the proportional gain, output units per measurement unit.
	Kp float64 `json:"kp"`
	// Ki is the integral gain, per second.
	Ki float64 `json:"ki"`
	// Min and Max bound the output; Slew limits its increase per update.
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Slew float64 `json:"slew,omitempty"`
	// Model is the plant model. Its DeadTime must be the loop's total dead
	// time: plant dead time plus the measurement and sampling delays.
	Model FOPDT `json:"model"`
	// MeasurementMin and MeasurementMax are the valid measurement range
	// (ignored when Max <= Min).
	MeasurementMin float64 `json:"ymin,omitempty"`
	MeasurementMax float64 `json:"ymax,omitempty"`
}

// Validate reports whether c can drive a SmithPredictor.
func (c SmithConfig) Validate() error {
	pc := Config{Kp: c.Kp, Ki: c.Ki, Min: c.Min, Max: c.Max, Slew: c.Slew,
		MeasurementMin: c.MeasurementMin, MeasurementMax: c.MeasurementMax}
	if err := pc.Validate(); err != nil {
		return err
	}
	if err := c.Model.Validate(); err != nil {
		return fmt.Errorf("smith predictor model: %w", err)
	}
	return nil
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
	History []Segment `json:"hist,omitempty"`
}

// SmithPredictor is a PI controller with a Smith predictor.
type SmithPredictor struct {
	Config SmithConfig `json:"config"`
	State  SmithState  `json:"state"`
}

// Update runs one sampling period. As with Controller, an invalid
// measurement holds the output and reports Held, and a datapoint that is not
// newer than the last integrated one is not integrated again.
func (c *SmithPredictor) Update(in Input) Output {
	cfg := &c.Config
	s := &c.State
	dt := max(in.SamplingInterval, 0)
	m := cfg.Model
	valid := (Config{MeasurementMin: cfg.MeasurementMin, MeasurementMax: cfg.MeasurementMax}).ValidMeasurement(in.Measurement) &&
		!math.IsNaN(in.Setpoint) && !math.IsInf(in.Setpoint, 0)
	if !s.Init {
		s.Init = true
		u0 := cfg.Min
		if valid {
			u0 = clamp(m.Input(in.Measurement), cfg.Min, cfg.Max)
		}
		s.Output = u0
		s.Integral = u0
		s.History = []Segment{{At: -time.Hour, Value: u0}}
		s.SampleEnd = math.MinInt64
	}
	s.Clock += dt
	if !valid {
		return Output{Rate: s.Output, I: s.Integral, Held: true}
	}
	// Predicted measurement: y + model(no delay) - model(delayed).
	fast := m.Base + m.Gain*lagAt(s.History, m.Tau, s.Clock)
	slow := m.Base + m.Gain*lagAt(s.History, m.Tau, s.Clock-m.DeadTime)
	ref := in.Setpoint
	e := ref - (in.Measurement + fast - slow)

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
	out := Output{Reference: ref, Error: e, P: cfg.Kp * e}
	pc := Config{Min: cfg.Min, Max: cfg.Max, Slew: cfg.Slew}
	integral := s.Integral
	if isNew && cfg.Ki != 0 {
		integral += cfg.Ki * e * dtI.Seconds()
		out.Integrated = true
	}
	v := out.P + integral
	u := limit(v, s.Output, &pc)
	if out.Integrated && u != v && (v > u) == (e > 0) {
		integral = s.Integral
		out.Integrated = false
		v = out.P + integral
		u = limit(v, s.Output, &pc)
	}
	if math.IsNaN(integral) || math.IsInf(integral, 0) {
		integral = s.Integral
	}
	if math.IsNaN(u) {
		u = s.Output
	}
	s.Integral, s.Output = integral, u
	if isNew {
		s.SampleEnd = sampleEnd
	}
	s.History = appendSegment(s.History, Segment{At: s.Clock, Value: u})
	s.History = pruneSegments(s.History, s.Clock-max(m.DeadTime+6*m.Tau+2*dt, 30*time.Minute))
	out.I, out.Rate, out.Saturated = integral, u, u != v
	return out
}
