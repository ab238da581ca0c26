package control

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// AntiWindup selects how the integrator is kept from winding up while the
// output is saturated (Astrom & Hagglund, Advanced PID Control, 2006, sec. 3.5).
type AntiWindup string

const (
	// AntiWindupNone integrates unconditionally (the textbook PI; it winds up).
	AntiWindupNone AntiWindup = ""
	// AntiWindupConditional integrates only up to the bounds (conditional
	// integration, the thesis's choice): the integrator never holds more than
	// puts the output at a bound, the other terms included, and integrates
	// upward only as far as the slew limit lets the output go.
	AntiWindupConditional AntiWindup = "conditional"
	// AntiWindupBackCalculation feeds the difference between the saturated
	// and the unsaturated output back into the integrator with the tracking
	// time constant Config.TrackingTime (back-calculation).
	AntiWindupBackCalculation AntiWindup = "back-calculation"
)

// Mode is the operating mode of a controller.
type Mode string

const (
	// ModeAuto closes the loop (the zero value).
	ModeAuto Mode = ""
	// ModeManual outputs Config.ManualRate; the integrator tracks it so that
	// the switch back to auto is bumpless.
	ModeManual Mode = "manual"
)

// Config configures a Controller: the PID family (P, PI, PID) with derivative
// on the measurement, a first-order derivative filter, output bounds, a
// per-update slew limit, selectable anti-windup, a first-order setpoint filter
// and reference feedforward from an identified FOPDT model.
//
// The control law (Astrom & Murray, Feedback Systems, 2nd ed., sec. 11.3-11.5;
// Astrom & Hagglund, Advanced PID Control, ch. 3) is
//
//	u = uff + Kp e + I + D,  I = integral of Ki e dt,  D = -Kd dy_f/dt
//
// where the error e = r - y is positive when the measurement y is below the
// reference r, so a positive Kp raises the rate when CPU is below the
// setpoint. With Feedforward set, r is not the raw setpoint but the response
// that the model predicts for the measurement to the feedforward already sent
// (a two-degree-of-freedom structure with a reference model), and uff is the
// static inverse of the model at the filtered setpoint. A plant that behaves
// like its model then shows e = 0 and the feedback only corrects model error
// and disturbances.
type Config struct {
	// Kp is the proportional gain, output units per measurement unit:
	// (msg/s) per point of CPU.
	Kp float64 `json:"kp"`
	// Ki is the integral gain, (msg/s) per point-second: Kp / Ti. Each
	// datapoint adds Ki times the error times its interval in seconds.
	Ki float64 `json:"ki"`
	// Kd is the derivative gain, msg per point ((msg/s)·s per point):
	// Kp Td, times the measurement's slope in points per second. It acts
	// on the measurement.
	Kd float64 `json:"kd"`
	// DerivativeFilter is the time constant of the first-order filter on the
	// derivative (typically Td/N with N between 5 and 20). Zero: unfiltered.
	DerivativeFilter time.Duration `json:"df,omitempty"`
	// Min and Max bound the output.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Slew is the largest increase of the output per update, output units;
	// decreases are not limited (a lower rate is always safe to apply at
	// once). Zero: no slew limit.
	Slew float64 `json:"slew,omitempty"`
	// AntiWindup selects the anti-windup scheme.
	AntiWindup AntiWindup `json:"aw,omitempty"`
	// TrackingTime is the back-calculation tracking time constant Tt. Zero
	// with back-calculation: Ti = Kp/Ki (Astrom & Hagglund's upper choice).
	TrackingTime time.Duration `json:"tt,omitempty"`
	// SetpointFilter is the time constant of the first-order setpoint filter.
	// Zero: the setpoint is used as given.
	SetpointFilter time.Duration `json:"spf,omitempty"`
	// Feedforward, when not nil, adds the static inverse of this model at the
	// filtered setpoint to the output and makes the feedback error relative
	// to the model's predicted response to that feedforward. Its DeadTime is
	// the plant's own dead time; the measurement pipeline's delay comes from
	// Input.MeasurementAge and Input.MeasurementPeriod.
	Feedforward *FOPDT `json:"ff,omitempty"`
	// AdaptGain makes the delay-aware integrator re-identify the plant's
	// gain online (needs DelayAware; adapt.go): the feedforward, the
	// prediction and the integral gain use the model's gain times the
	// estimated scale, so that a plant whose gain moved away from the model
	// is neither over- nor under-corrected. Changes of the scale are
	// bumpless (the integrator takes up the feedforward's jump).
	AdaptGain bool `json:"ag,omitempty"`
	// DelayAware makes the integrator delay-aware (needs Feedforward): it
	// integrates the error that would remain once every output already sent
	// has shown in the measurement, projected through the model and the
	// measurement's age and averaging period, instead of the raw error. The
	// integrator then does not integrate the same stale error over and over
	// while the measurement cannot yet show the effect of the last move (a
	// predictor on the known measurement delay, in the spirit of the Smith
	// predictor, Astrom & Hagglund 2006 sec. 7.4), and Ki may be set for the
	// delay-free loop: Ki = 1/(gain Tc) with Tc about the loop dead time.
	// It needs Input.MeasurementAge and Input.MeasurementPeriod: without
	// them the prediction assumes the measurement is instantaneous, and so
	// large a Ki will oscillate.
	DelayAware bool `json:"da,omitempty"`
	// NoiseBand, when positive, makes the integral gain depend on the size
	// of an error that calls for a higher rate: such an error e is
	// integrated as e * e^2/(e^2 + NoiseBand^2), so that errors of the size
	// of the measurement noise raise the rate little while load changes far
	// above the noise are followed at full speed (a nonlinear,
	// error-squared-like PI; Astrom & Hagglund 2006, sec. 3.8; Shinskey,
	// Process Control Systems, 1996). Errors that call for a lower rate
	// (CPU above the setpoint) are always integrated linearly, so the loop
	// approaches the setpoint from below and noise does not push the CPU
	// above it. Set it to about three times the noise's standard deviation.
	NoiseBand float64 `json:"nb,omitempty"`
	// MeasurementMin and MeasurementMax are the valid range of the
	// measurement (0 and 100 for CPU). When Max <= Min only NaN and Inf are
	// refused.
	MeasurementMin float64 `json:"ymin,omitempty"`
	MeasurementMax float64 `json:"ymax,omitempty"`
	// MaxGap bounds the time one new datapoint is integrated over: after a
	// gap (a missed schedule, a publishing stall) it stands for at most this
	// long. Zero: at most one sampling interval or one measurement period,
	// whichever is longer. The derivative always uses the true time between
	// the datapoints it compares.
	MaxGap time.Duration `json:"maxgap,omitempty"`
	// Mode is auto (the zero value) or manual.
	Mode Mode `json:"mode,omitempty"`
	// ManualRate is the output in manual mode.
	ManualRate float64 `json:"manual,omitempty"`
	// DemandConfig holds the demand-limited hold and the ceiling cut
	// (demand.go).
	DemandConfig
}

// Validate reports whether c can drive a Controller.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"kp", c.Kp}, {"ki", c.Ki}, {"kd", c.Kd}, {"slew", c.Slew}, {"noise band", c.NoiseBand}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%s %v: must be a finite number >= 0", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"min", c.Min}, {"max", c.Max}, {"manual rate", c.ManualRate}, {"measurement min", c.MeasurementMin}, {"measurement max", c.MeasurementMax}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s %v: must be a finite number", f.name, f.v)
		}
	}
	if c.Max <= c.Min {
		return fmt.Errorf("output bounds [%v, %v]: max must be above min", c.Min, c.Max)
	}
	if c.DerivativeFilter < 0 || c.TrackingTime < 0 || c.SetpointFilter < 0 || c.MaxGap < 0 {
		return errors.New("filter and tracking time constants and the maximum gap must not be negative")
	}
	switch c.AntiWindup {
	case AntiWindupNone, AntiWindupConditional, AntiWindupBackCalculation:
	default:
		return fmt.Errorf("anti-windup %q: want %q, %q or none", c.AntiWindup, AntiWindupConditional, AntiWindupBackCalculation)
	}
	switch c.Mode {
	case ModeAuto, ModeManual:
	default:
		return fmt.Errorf("mode %q: want auto or %q", c.Mode, ModeManual)
	}
	if err := c.validateDemand(); err != nil {
		return err
	}
	if c.AdaptGain && !c.DelayAware {
		return errors.New("gain adaptation needs the delay-aware integrator")
	}
	if c.DelayAware && c.Feedforward == nil {
		return errors.New("a delay-aware integrator needs the feedforward model")
	}
	if c.Feedforward != nil {
		if err := c.Feedforward.Validate(); err != nil {
			return fmt.Errorf("feedforward: %w", err)
		}
	}
	return nil
}

// State is the memory of a Controller: plain data that round-trips through
// encoding/json exactly, so that a controller restored from saved state
// continues exactly as the original would have.
type State struct {
	// Init is true once the controller has run.
	Init bool `json:"init"`
	// Clock is the sum of the sampling intervals seen so far.
	Clock time.Duration `json:"clock"`
	// Integral is the integral term, output units.
	Integral float64 `json:"i"`
	// FilteredSetpoint is the setpoint filter's state.
	FilteredSetpoint float64 `json:"rf"`
	// Derivative is the filtered derivative of the measurement, per second.
	Derivative float64 `json:"dy"`
	// Measurement is the last valid measurement used.
	Measurement float64 `json:"y"`
	// HaveMeasurement is true once a valid measurement was used.
	HaveMeasurement bool `json:"hy,omitempty"`
	// SampleEnd is the Clock instant at which the last integrated
	// measurement's averaging period ended.
	SampleEnd time.Duration `json:"se"`
	// Error is the feedback error at the last valid update.
	Error float64 `json:"e"`
	// Kp and Kd are the gains in force at the last update (for bumpless
	// gain changes).
	Kp float64 `json:"kp"`
	Kd float64 `json:"kd"`
	// Output is the last output.
	Output float64 `json:"u"`
	// FF is the feedforward term of the last update.
	FF float64 `json:"ff"`
	// Reference is the history of the filtered setpoint that the feedforward
	// was computed from, oldest first.
	Reference []Segment `json:"ref,omitempty"`
	// Applied is the history of the output, oldest first (delay-aware
	// integrator).
	Applied []Segment `json:"applied,omitempty"`
	// Adapt is the gain estimator's memory (Config.AdaptGain).
	Adapt Adaptation `json:"adapt,omitzero"`
}

// Input is one update's input.
type Input struct {
	// Setpoint is the reference value (CPU percent).
	Setpoint float64
	// Measurement is the newest measured value; NaN when missing.
	Measurement float64
	// MeasurementAge is how long before this update the measurement's
	// averaging period ended (for CloudWatch: now - (timestamp + period)).
	// Zero when unknown.
	MeasurementAge time.Duration
	// MeasurementPeriod is the length of the measurement's averaging period.
	// Zero for an instantaneous sample.
	MeasurementPeriod time.Duration
	// SamplingInterval is the time since the previous update.
	SamplingInterval time.Duration
	// ActualRate is the rate the plant really received since the previous
	// update (the consumers' processed rate), when ActualKnown. A rate
	// below the last output (by more than 5 % and, under a slew limit, one
	// slew step) means something else limited it (an empty
	// queue, slow consumers): the integrator does not wind up against that
	// limit (unless AntiWindup is none), and the delay-aware prediction
	// uses what was really applied (tracking of the actuator's output,
	// Astrom & Hagglund 2006, sec. 3.5).
	ActualRate  float64
	ActualKnown bool
	// ActualAllowed, when positive, is the rate the plant was allowed over
	// the same window and with the same averaging as ActualRate (an
	// exponential average of the outputs in force): what ActualRate would
	// read had the plant taken all of it. The limited test then compares
	// like with like: an average lags a rate that climbs, and a plant that
	// takes all of a rising rate is not limited by something else. Zero
	// compares ActualRate with the last output.
	ActualAllowed float64
	// Feedforward, when FeedforwardKnown and the controller has no model
	// (Config.Feedforward nil), is a measured feedforward added to the
	// output: the rate that holds the measurement steady as measured now,
	// for an integrating signal such as a replication lag, what the replica
	// applies (pkg/loop's drain_feedforward). Its changes pass to the
	// output as they come (a measured disturbance, not a reference): the
	// integrator keeps only what the measure misses.
	Feedforward      float64
	FeedforwardKnown bool
	// ActualCounted, when positive, is the rate the plant took over this
	// interval alone, as counted (not averaged as ActualRate may be), for a
	// plant whose input is not the output alone: a destination's members
	// (pkg/loop), whose split gives out margins that a member whose demand
	// grows takes for a tick, and whose estimates of their queues' needs
	// err at a tick after their shares moved. When it lies outside the
	// rates in force over the interval (above both the last output and
	// ActualAllowed, or below the lesser of them: a rate that moved, which
	// counts lag, is not a plant that took more or less), the delay-aware
	// prediction uses it for the interval, what the plant received. Zero
	// for none.
	ActualCounted float64
}

// Output is one update's result, with the terms that make it up.
type Output struct {
	// Rate is the control signal: the allowed rate, within [Min, Max].
	Rate float64 `json:"rate"`
	// P, I, D and FF are the proportional, integral, derivative and
	// feedforward terms before saturation.
	P  float64 `json:"p"`
	I  float64 `json:"i"`
	D  float64 `json:"d"`
	FF float64 `json:"ff"`
	// Reference is the value the measurement was compared with: the
	// filtered setpoint, or the model's predicted measurement with
	// feedforward.
	Reference float64 `json:"ref"`
	// Error is Reference - Measurement.
	Error float64 `json:"e"`
	// Saturated is true when the bounds or the slew limit cut the output.
	Saturated bool `json:"sat"`
	// Integrated is true when this update advanced the integrator.
	Integrated bool `json:"integrated"`
	// Held is true when the measurement was missing, NaN, infinite or out
	// of range: the controller held its previous output and the caller
	// should apply its stale-metric policy (see StalePolicy).
	Held bool `json:"held"`
	// DemandLimited is true when the plant took clearly less than the last
	// output and the output was held near what it took; Cut is true when a
	// measurement at the ceiling cut the output (demand.go).
	DemandLimited bool `json:"demand_limited,omitempty"`
	Cut           bool `json:"cut,omitempty"`
	// ActualLimited is true when Input.ActualRate said the plant took
	// clearly less than the last output: the delay-aware history then holds
	// what it took, an average over the interval, so when within it the
	// plant's input changed is not known. It says what this update saw and
	// is not encoded.
	ActualLimited bool `json:"-"`
}

// actualTolerance is how far, relative to the last output, Input.ActualRate
// may fall below it before the plant counts as limited by something else
// (batching and the time a batch takes make the two differ a little); under
// a slew limit, one slew step more (trackActual).
const actualTolerance = 0.05

// Controller is a discrete PID controller: plain data (Config and State)
// plus Update.
type Controller struct {
	Config Config `json:"config"`
	State  State  `json:"state"`
}

// ValidMeasurement reports whether y may reach the controller under c.
func (c Config) ValidMeasurement(y float64) bool {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return false
	}
	if c.MeasurementMax > c.MeasurementMin && (y < c.MeasurementMin || y > c.MeasurementMax) {
		return false
	}
	return true
}

// Reset clears the controller's state.
func (c *Controller) Reset() { c.State = State{} }

// Update runs one sampling period and returns the new output. An invalid
// measurement (NaN, Inf, out of range) never reaches the integrator: the
// controller holds its previous output (within the bounds in force) and
// reports Held; a caller that sends another rate instead records it with
// Override. A measurement whose averaging period ended no later than the last
// integrated one is not integrated again (a delay-aware integrator: the same
// stale datapoint is not integrated over and over), nor differentiated.
// Nothing that is not a finite number is ever stored in the state.
func (c *Controller) Update(in Input) Output {
	in = in.bounded()
	valid := c.Config.ValidMeasurement(in.Measurement) && !math.IsNaN(in.Setpoint) && !math.IsInf(in.Setpoint, 0)
	first := !c.State.Init
	if first {
		c.start(in, valid)
	}
	c.State.Clock += in.SamplingInterval
	limited := c.trackActual(in)
	if c.Config.Mode != ModeManual && !valid {
		// Held, within the bounds in force (they may have been edited).
		c.Override(c.State.Output)
		return Output{Rate: c.State.Output, I: c.State.Integral, Held: true, ActualLimited: limited}
	}
	prevSetpoint := c.State.FilteredSetpoint
	c.filterSetpoint(in)
	c.feedforwardChange(first, prevSetpoint, in)
	out := Output{ActualLimited: limited}
	ref, predicted := c.reference(&out, in, valid)
	y, e, eI := c.errors(&out, in, valid, ref, predicted, prevSetpoint)
	smp := c.sample(in, valid, y)
	c.gainChange()
	out.P = saturate(c.Config.Kp * e)
	out.D = saturate(-c.Config.Kd * c.State.Derivative)
	var u float64
	if c.Config.Mode == ModeManual {
		u = c.track(&out)
	} else {
		u = c.integrate(&out, smp, eI, limited)
		// The demand rules (demand.go): a datapoint at the ceiling cuts
		// the rate to what the plant took there, and a plant that took
		// clearly less than it was sent (an idle queue, not a slow
		// destination) holds the rate near what was consumed, so that
		// neither winds the rate up past what can be used.
		u = c.applyDemand(&out, demandStep{u: u, y: y, fresh: smp.isNew, limited: limited}, in)
	}
	c.State.FF = out.FF
	c.State.finish(y, e, u, valid, smp.isNew, smp.end)
	c.recordApplied(u, &in)
	return out
}

// start initializes the state at the first update: the plant is assumed at
// steady state at the first measurement (the setpoint when there is none
// yet), the setpoint filter starts there (a bumpless start), and with a
// model the output starts at what holds the plant there.
func (c *Controller) start(in Input, valid bool) {
	cfg, s := &c.Config, &c.State
	s.Init = true
	s.Kp, s.Kd = cfg.Kp, cfg.Kd
	y0 := in.Setpoint
	if valid {
		y0 = in.Measurement
	}
	if math.IsNaN(y0) || math.IsInf(y0, 0) {
		y0 = 0
	}
	s.FilteredSetpoint = y0
	s.Output = cfg.Min
	if cfg.Feedforward != nil {
		s.FF = saturate(cfg.Feedforward.Input(y0))
		s.Output = clamp(s.FF, cfg.Min, cfg.Max)
		s.Reference = []Segment{{At: -time.Hour, Value: y0}}
		if cfg.DelayAware {
			s.Applied = []Segment{{At: -time.Hour, Value: s.Output}}
		}
	}
	s.SampleEnd = math.MinInt64
}

// trackActual reports whether the plant received less than the last output
// since the last update (Input.ActualRate), and then corrects the history
// the delay-aware prediction runs on: with what it received, or with the
// rate counted over the interval when that lies outside the rates in force
// (Input.ActualCounted). Under a slew limit the plant may take
// one slew step less: consumers that pick up a new rate during the interval
// took partly the output before, which the slew limit keeps at most one step
// below the last one, and a climb at the slew limit is not a plant that
// cannot take the output.
func (c *Controller) trackActual(in Input) bool {
	cfg, s := &c.Config, &c.State
	dt := in.SamplingInterval
	allowed := s.Output
	if in.ActualAllowed > 0 && !math.IsInf(in.ActualAllowed, 0) {
		allowed = math.Min(allowed, in.ActualAllowed)
	}
	limited := in.ActualKnown && !math.IsNaN(in.ActualRate) && in.ActualRate < allowed*(1-actualTolerance)-cfg.Slew
	counted := in.ActualCounted
	outside := !limited && counted > 0 && !math.IsInf(counted, 1) && (counted > math.Max(s.Output, in.ActualAllowed) || counted < allowed)
	if (limited || outside) && cfg.DelayAware && len(s.Applied) > 0 && dt > 0 {
		actual := math.Max(0, in.ActualRate)
		if outside {
			actual = counted
		}
		if n := len(s.Applied); s.Applied[n-1].At >= s.Clock-dt {
			s.Applied[n-1].Value = actual
		} else {
			s.Applied = append(s.Applied, Segment{At: s.Clock - dt, Value: actual})
		}
	}
	return limited
}

// filterSetpoint runs the setpoint filter, the exact discretization of
// 1/(Tf s + 1).
func (c *Controller) filterSetpoint(in Input) {
	cfg, s := &c.Config, &c.State
	sp := in.Setpoint
	if math.IsNaN(sp) || math.IsInf(sp, 0) {
		sp = s.FilteredSetpoint
	}
	if cfg.SetpointFilter > 0 {
		a := math.Exp(-in.SamplingInterval.Seconds() / cfg.SetpointFilter.Seconds())
		s.FilteredSetpoint = saturate(a*s.FilteredSetpoint + (1-a)*sp)
	} else {
		s.FilteredSetpoint = sp
	}
}

// feedforwardChange makes feedforward changes bumpless: when the model
// changed, or the feedforward was switched on or off, since the last update,
// the integrator takes up the jump that the feedforward would make. A
// measured feedforward (Input.Feedforward) is not: its changes are the
// plant's; when it appears the integrator starts over at 0, when it goes the
// integrator takes it up.
func (c *Controller) feedforwardChange(first bool, prevSetpoint float64, in Input) {
	cfg, s, dt := &c.Config, &c.State, in.SamplingInterval
	ffPrev := 0.0
	if m := c.model(); m == nil && in.FeedforwardKnown {
		// A measured feedforward passes to the output as it comes; when
		// it appears the integrator starts over from it (it holds only
		// what the measure misses).
		if s.FF == 0 && !first {
			s.Integral = 0
		}
		return
	} else if m != nil {
		ffPrev = saturate(m.Input(prevSetpoint))
		if len(s.Reference) == 0 {
			s.Reference = []Segment{{At: s.Clock - dt - 24*time.Hour, Value: prevSetpoint}}
		}
		if cfg.DelayAware && len(s.Applied) == 0 {
			s.Applied = []Segment{{At: s.Clock - dt - 24*time.Hour, Value: s.Output}}
		}
	}
	if !first && ffPrev != s.FF {
		s.Integral = finite(s.Integral+(s.FF-ffPrev), s.Integral)
	}
}

// reference returns what the measurement is compared with: the filtered
// setpoint or, with a model, the measurement the model expects for the
// reference in force when the datapoint was taken; and, for the
// delay-aware integrator, the steady state projected from the measurement
// and the output still in flight (NaN otherwise). It sets out.FF.
func (c *Controller) reference(out *Output, in Input, valid bool) (ref, predicted float64) {
	cfg, s := &c.Config, &c.State
	ref, predicted = s.FilteredSetpoint, math.NaN()
	m := c.model()
	if m == nil {
		if in.FeedforwardKnown {
			out.FF = saturate(finite(in.Feedforward, 0))
		}
		return ref, predicted
	}
	end := s.Clock - in.MeasurementAge
	ref = m.expected(s.Reference, end-in.MeasurementPeriod, end)
	if cfg.DelayAware && valid {
		applied := m.expected(s.Applied, end-in.MeasurementPeriod, end)
		m = c.adapt(in.Measurement, cfg.Feedforward.Gain*applied, end)
		seen := m.Base + m.Gain*applied
		predicted = in.Measurement + m.Output(s.Output) - seen
	}
	out.FF = saturate(m.Input(s.FilteredSetpoint))
	s.Reference = appendSegment(s.Reference, Segment{At: s.Clock, Value: s.FilteredSetpoint})
	s.Reference = pruneSegments(s.Reference, s.Clock-historyHorizon(m, in))
	return ref, predicted
}

// errors returns the measurement used (the last valid one in manual mode
// with a bad measurement), the error, and the error the integrator
// integrates (from the prediction when there is one, shaped by the noise
// band). It sets out.Reference and out.Error.
func (c *Controller) errors(out *Output, in Input, valid bool, ref, predicted, prevSetpoint float64) (y, e, eI float64) {
	s := &c.State
	y = in.Measurement
	if !valid {
		y = s.Measurement
		if !s.HaveMeasurement {
			y = ref
		}
	}
	e = saturate(ref - y)
	out.Reference, out.Error = ref, e
	eI = e
	if !math.IsNaN(predicted) {
		eI = prevSetpoint - predicted
	}
	if b := c.Config.NoiseBand; b > 0 && eI > 0 {
		eI *= eI * eI / (eI*eI + b*b)
	}
	return y, e, eI
}

// sample is what an update knows of its datapoint.
type sample struct {
	isNew bool          // a datapoint not used before
	end   time.Duration // when its period ended, on the controller's clock
	dt    time.Duration // the time it stands for in the integral
}

// sample tells whether the measurement is a new datapoint and the time it
// stands for (since the previous datapoint, at most one update or one
// period, at most MaxGap), and updates the derivative, which divides by the
// true time since the previous datapoint.
func (c *Controller) sample(in Input, valid bool, y float64) sample {
	cfg, s := &c.Config, &c.State
	end := s.Clock - in.MeasurementAge
	timed := in.MeasurementAge != 0 || in.MeasurementPeriod != 0
	isNew := valid && (!timed || end > s.SampleEnd)
	dtI := in.SamplingInterval
	if isNew && in.MeasurementPeriod > 0 {
		dtI = in.MeasurementPeriod
	}
	if isNew && s.SampleEnd != math.MinInt64 && timed {
		dtI = min(end-s.SampleEnd, max(in.SamplingInterval, in.MeasurementPeriod))
	}
	if isNew && s.HaveMeasurement {
		gap := dtI
		if timed && s.SampleEnd != math.MinInt64 {
			gap = end - s.SampleEnd
		}
		c.differentiate(y, gap)
	}
	if cfg.MaxGap > 0 {
		dtI = min(dtI, cfg.MaxGap)
	}
	return sample{isNew: isNew, end: end, dt: dtI}
}

// gainChange makes a change of Kp or Kd bumpless: the integrator moves so
// that the output does not jump (Astrom & Hagglund 2006, sec. 3.6).
func (c *Controller) gainChange() {
	cfg, s := &c.Config, &c.State
	if s.Kp != cfg.Kp || s.Kd != cfg.Kd {
		s.Integral = finite(s.Integral+((s.Kp-cfg.Kp)*s.Error-(s.Kd-cfg.Kd)*s.Derivative), s.Integral)
		s.Kp, s.Kd = cfg.Kp, cfg.Kd
	}
}

// track is manual mode: the output is the manual rate (bounded, slew
// limited on the way up), and the integrator takes what auto would need to
// continue from it.
func (c *Controller) track(out *Output) float64 {
	cfg, s := &c.Config, &c.State
	u := limit(cfg.ManualRate, s.Output, cfg)
	s.Integral = finite(u-out.FF-out.P-out.D, s.Integral)
	out.I, out.Rate, out.Saturated = s.Integral, u, u != cfg.ManualRate
	return u
}

// integrate is auto mode: integrate a new datapoint's error, unless the
// plant could not take the last output and more is asked (that would only
// wind up), then bound the output under the anti-windup scheme.
func (c *Controller) integrate(out *Output, smp sample, eI float64, limited bool) float64 {
	cfg, s := &c.Config, &c.State
	step := 0.0
	if smp.isNew && cfg.Ki != 0 {
		step = cfg.Ki / c.scale() * eI * smp.dt.Seconds()
		out.Integrated = true
	}
	if out.Integrated && limited && eI > 0 && cfg.AntiWindup != AntiWindupNone {
		step, out.Integrated = 0, false
	}
	var integral, u float64
	if cfg.AntiWindup == AntiWindupConditional {
		integral, u = c.conditional(out, step, eI)
	} else {
		integral, u = c.backCalculate(out, step, smp.dt)
	}
	integral = finite(integral, s.Integral)
	if math.IsNaN(u) {
		u = s.Output
	}
	s.Integral = integral
	out.I, out.Rate = integral, u
	return u
}

// backCalculate bounds the output with no anti-windup, or with
// back-calculation: while saturated, the integrator is pulled toward the
// bound with the tracking time constant (Astrom & Hagglund 2006, sec. 3.5;
// Kp/Ki by default).
func (c *Controller) backCalculate(out *Output, step float64, dtI time.Duration) (integral, u float64) {
	cfg, s := &c.Config, &c.State
	integral = s.Integral
	if out.Integrated {
		integral += step
	}
	v := out.FF + out.P + integral + out.D
	u = limit(v, s.Output, cfg)
	out.Saturated = u != v
	if cfg.AntiWindup == AntiWindupBackCalculation && out.Integrated && u != v {
		tt := cfg.TrackingTime.Seconds()
		if tt <= 0 && cfg.Ki > 0 {
			tt = cfg.Kp / cfg.Ki
		}
		k := 1.0
		if tt > 0 {
			k = math.Min(1, dtI.Seconds()/tt)
		}
		integral += k * (u - v)
	}
	return integral, u
}

// Override records that the rate really sent from now on is u, not the last
// output: what a stale-metric policy set while the controller held (see
// Output.Held), or any other rate the caller applied instead. The next update
// starts from u (slew limit, anti-windup, manual tracking), and the
// delay-aware integrator predicts from what was really applied. u is kept
// within [Min, Max]; NaN is ignored.
func (c *Controller) Override(u float64) {
	if math.IsNaN(u) || !c.State.Init {
		return
	}
	c.State.Output = clamp(u, c.Config.Min, c.Config.Max)
	c.recordApplied(c.State.Output, nil)
}

// conditional is conditional integration kept within the bounds (Astrom &
// Hagglund 2006, sec. 3.5): the integrator never holds more than puts the
// output at a bound, the feedforward, P and D terms included. It integrates up
// to a bound rather than stopping one step short of it; an integrator that
// lies beyond a bound (a feedforward beyond it, bounds that were tightened)
// is first brought back to it, so that the output leaves the bound as soon as
// the error turns, as a loop that always had that bound would. While the
// slew limit holds back an increase it integrates upward only as far as the
// slew limit lets the output go, so that the output climbs at the slew
// limit and the integrator holds no more than the output took. It
// returns the integral and the output; it sets out.Integrated and
// out.Saturated (also when the slew limit cut the integrator's step).
func (c *Controller) conditional(out *Output, step, eI float64) (integral, u float64) {
	cfg, s := &c.Config, &c.State
	rest := out.FF + out.P + out.D
	lo, hi := cfg.Min-rest, cfg.Max-rest
	// at is the output for integral i: exactly the bound when i is at its
	// limit.
	at := func(i float64) float64 {
		switch {
		case i >= hi:
			return cfg.Max
		case i <= lo:
			return cfg.Min
		}
		return out.FF + out.P + i + out.D
	}
	base := clamp(s.Integral, lo, hi)
	integral = base + step
	bounded := integral > hi || integral < lo
	integral = clamp(integral, lo, hi)
	if bounded && integral == base {
		out.Integrated = false
	}
	v := at(integral)
	u = limit(v, s.Output, cfg)
	slewed := out.Integrated && u < v && eI > 0
	if slewed {
		// The slew limit holds the output back and the error pushes
		// further: integrate only as far as the output may go (u less
		// the other terms), never below where the integrator was.
		integral = clamp(u-rest, base, integral)
		out.Integrated = integral != base
		v = at(integral)
		u = limit(v, s.Output, cfg)
	}
	out.Saturated = u != v || bounded || slewed
	return integral, u
}

// differentiate updates the filtered derivative of the measurement with the
// new datapoint y, gap after the previous one.
func (c *Controller) differentiate(y float64, gap time.Duration) {
	s := &c.State
	if gap <= 0 {
		return
	}
	raw := (y - s.Measurement) / gap.Seconds()
	if tf := c.Config.DerivativeFilter; tf > 0 {
		a := math.Exp(-gap.Seconds() / tf.Seconds())
		s.Derivative = saturate(a*s.Derivative + (1-a)*raw)
	} else {
		s.Derivative = saturate(raw)
	}
}

// recordApplied keeps the output history of the delay-aware integrator; in
// (nil: none) sets how much of it to keep.
func (c *Controller) recordApplied(u float64, in *Input) {
	if !c.Config.DelayAware || c.Config.Feedforward == nil {
		return
	}
	s := &c.State
	if len(s.Applied) == 0 {
		s.Applied = []Segment{{At: -time.Hour, Value: u}}
	}
	s.Applied = appendSegment(s.Applied, Segment{At: s.Clock, Value: u})
	if in != nil {
		s.Applied = pruneSegments(s.Applied, s.Clock-historyHorizon(c.Config.Feedforward, *in))
	}
}

// finish records the update. The measurement is kept only when it is a new
// datapoint: an older one that arrives late is not the previous measurement
// of the next derivative.
func (s *State) finish(y, e, u float64, valid, isNew bool, sampleEnd time.Duration) {
	if valid {
		s.Error = e
	}
	if isNew {
		s.Measurement, s.HaveMeasurement = y, true
		s.SampleEnd = sampleEnd
	}
	s.Output = u
}

// limit applies the slew limit above prev, then the bounds. The slew limit
// paces increases only: a lower rate (a lower manual rate, max_rate or
// setpoint, a load the destination cannot take) takes effect at once.
func limit(v, prev float64, c *Config) float64 {
	if c.Slew > 0 {
		v = math.Min(v, prev+c.Slew)
	}
	return clamp(v, c.Min, c.Max)
}

// maxInterval bounds Input.SamplingInterval, and maxAge Input.MeasurementAge
// and Input.MeasurementPeriod, so that the Clock arithmetic cannot overflow
// (the Clock then lasts 290 years of updates a day apart): a longer interval
// counts as a day.
const (
	maxInterval = 24 * time.Hour
	maxAge      = 100 * 365 * 24 * time.Hour
)

// bounded returns in with its durations within what Update can take: none
// negative (a datapoint cannot end after now), none that overflows the Clock.
func (in Input) bounded() Input {
	in.SamplingInterval = min(max(in.SamplingInterval, 0), maxInterval)
	in.MeasurementAge = min(max(in.MeasurementAge, 0), maxAge)
	in.MeasurementPeriod = min(max(in.MeasurementPeriod, 0), maxAge)
	return in
}

// finite returns v, or else when v is NaN or infinite: every write to the
// integrator goes through it, so that the state stays saveable (encoding/json
// refuses NaN and Inf).
func finite(v, or float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return or
	}
	return v
}

// saturate returns v with NaN as 0 and the infinities as the largest finite
// values: for terms whose true value is beyond float64 (a gain of 1e300
// times an error).
func saturate(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}

func clamp(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return lo
	}
	return math.Max(lo, math.Min(hi, v))
}

func historyHorizon(m *FOPDT, in Input) time.Duration {
	h := in.MeasurementAge + in.MeasurementPeriod + m.DeadTime + 6*m.Tau + 2*in.SamplingInterval
	return max(h, 30*time.Minute)
}
