package control

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// plant is a small discrete test plant: FOPDT with a measurement that is the
// average over the last tick, published one tick late.
type plant struct {
	m     FOPDT
	x     float64
	queue []float64 // inputs waiting out the dead time, one per second
	dist  float64
}

func newPlant(m FOPDT) *plant {
	p := &plant{m: m}
	p.queue = make([]float64, int(m.DeadTime/time.Second))
	return p
}

func (p *plant) cpu() float64 { return math.Max(0, math.Min(100, p.m.Base+p.x+p.dist)) }

// run applies u for one tick of n seconds and returns the average CPU.
func (p *plant) run(u float64, n int) float64 {
	sum := 0.0
	for range n {
		in := u
		if len(p.queue) > 0 {
			in = p.queue[0]
			p.queue = append(p.queue[1:], u)
		}
		a := math.Exp(-1 / p.m.Tau.Seconds())
		p.x = p.m.Gain*in + (p.x-p.m.Gain*in)*a
		sum += p.cpu()
	}
	return sum / float64(n)
}

var testModel = FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}

// closedLoop runs c against a test plant (true model truth) for n ticks of
// 60 s with the measurement published one tick late, a setpoint of 70 and a
// disturbance of dist points from tick 40 to 60. It returns the true CPU
// after each tick.
func closedLoop(c *Controller, truth FOPDT, n int, dist float64) []float64 {
	p := newPlant(truth)
	var cpu []float64
	last := p.cpu()
	prev := last
	for k := range n {
		if k >= 40 && k < 60 {
			p.dist = dist
		} else {
			p.dist = 0
		}
		out := c.Update(Input{Setpoint: 70, Measurement: prev, MeasurementAge: 60 * time.Second, MeasurementPeriod: 60 * time.Second, SamplingInterval: 60 * time.Second})
		prev = last
		last = p.run(out.Rate, 60)
		cpu = append(cpu, last)
	}
	return cpu
}

func maxOver(v []float64, from, to int, sp float64) float64 {
	m := math.Inf(-1)
	for _, x := range v[from:to] {
		m = math.Max(m, x-sp)
	}
	return m
}

func iae(v []float64, sp float64) float64 {
	s := 0.0
	for _, x := range v {
		s += math.Abs(x - sp)
	}
	return s * 60
}

func TestUpdateDirectionAndBounds(t *testing.T) {
	c := Controller{Config: Config{Kp: 2, Ki: 0.1, Min: 10, Max: 500}}
	low := c.Update(Input{Setpoint: 70, Measurement: 40, SamplingInterval: time.Minute})
	if low.Rate <= 10 {
		t.Fatalf("CPU below setpoint: rate %v; want it to rise above the minimum", low.Rate)
	}
	c.Reset()
	high := c.Update(Input{Setpoint: 70, Measurement: 95, SamplingInterval: time.Minute})
	if high.Rate != 10 || !high.Saturated {
		t.Fatalf("CPU far above setpoint: %+v; want the minimum rate, saturated", high)
	}
	for range 100 {
		out := c.Update(Input{Setpoint: 70, Measurement: 0, SamplingInterval: time.Minute})
		if out.Rate > 500 || out.Rate < 10 {
			t.Fatalf("rate %v outside [10, 500]", out.Rate)
		}
	}
}

func TestSlewLimit(t *testing.T) {
	c := Controller{Config: Config{Kp: 100, Min: 0, Max: 1000, Slew: 25}}
	prev := 0.0
	for k := range 20 {
		out := c.Update(Input{Setpoint: 70, Measurement: 10, SamplingInterval: time.Minute})
		if d := out.Rate - prev; d > 25+1e-9 {
			t.Fatalf("tick %d: rate moved %v; want at most 25", k, d)
		}
		prev = out.Rate
	}
	if prev != 500 {
		t.Fatalf("after 20 ticks rate = %v; want 20 x 25 = 500", prev)
	}
}

func TestInvalidMeasurementHolds(t *testing.T) {
	for _, y := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 101} {
		c := Controller{Config: Config{Kp: 1, Ki: 0.05, Min: 0, Max: 3000, MeasurementMin: 0, MeasurementMax: 100}}
		c.Update(Input{Setpoint: 70, Measurement: 50, SamplingInterval: time.Minute})
		before := c.State
		out := c.Update(Input{Setpoint: 70, Measurement: y, SamplingInterval: time.Minute})
		if !out.Held || out.Rate != before.Output || c.State.Integral != before.Integral {
			t.Errorf("measurement %v: %+v, integral %v -> %v; want held at %v with the integrator untouched", y, out, before.Integral, c.State.Integral, before.Output)
		}
	}
}

func TestSameDatapointIntegratedOnce(t *testing.T) {
	c := Controller{Config: Config{Ki: 0.01, Min: 0, Max: 3000}}
	// Ticks every 30 s, datapoints every 60 s: every other tick repeats the
	// datapoint (its age grows by 30 s).
	var integrated int
	for k := range 10 {
		age := 90 * time.Second
		if k%2 == 1 {
			age += 30 * time.Second
		}
		out := c.Update(Input{Setpoint: 70, Measurement: 60, MeasurementAge: age, MeasurementPeriod: time.Minute, SamplingInterval: 30 * time.Second})
		if out.Integrated {
			integrated++
		}
	}
	if integrated != 5 {
		t.Fatalf("integrated on %d of 10 ticks; want 5 (once per datapoint)", integrated)
	}
	// Each datapoint is integrated over its 60 s: 5 x 0.01 x 10 x 60 = 30.
	if got := c.State.Integral; math.Abs(got-30) > 1e-9 {
		t.Fatalf("integral = %v; want 30", got)
	}
}

func TestBumplessGainChangeExact(t *testing.T) {
	c := Controller{Config: Config{Kp: 2, Ki: 0.05, Min: 0, Max: 3000}}
	for range 5 {
		c.Update(Input{Setpoint: 70, Measurement: 50, MeasurementAge: time.Minute, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute})
	}
	before := c.State.Output
	c.Config.Kp = 10
	// The same datapoint again (age grows by the interval): nothing new to
	// integrate, so only the gain change could move the output.
	out := c.Update(Input{Setpoint: 70, Measurement: 50, MeasurementAge: 2 * time.Minute, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute})
	if math.Abs(out.Rate-before) > 1e-9 {
		t.Fatalf("Kp 2 -> 10: rate %v -> %v; want unchanged", before, out.Rate)
	}
	if out.P != 10*20 {
		t.Fatalf("P = %v; want the new gain's 200", out.P)
	}
}

func TestManualToAutoBumpless(t *testing.T) {
	c := Controller{Config: Config{Kp: 2, Ki: 0.05, Min: 0, Max: 3000, Mode: ModeManual, ManualRate: 800}}
	for k := range 5 {
		out := c.Update(Input{Setpoint: 70, Measurement: 60 + float64(k), SamplingInterval: time.Minute})
		if out.Rate != 800 {
			t.Fatalf("manual: rate %v; want 800", out.Rate)
		}
	}
	c.Config.Mode = ModeAuto
	out := c.Update(Input{Setpoint: 70, Measurement: 64, MeasurementAge: 0, SamplingInterval: time.Minute})
	// Auto continues from 800: the first auto tick may only add its own
	// integration step (Ki e dt = 0.05 x 6 x 60 = 18).
	if math.Abs(out.Rate-(800+18)) > 1e-9 {
		t.Fatalf("first auto tick: rate %v; want 818 (continuing from the manual 800)", out.Rate)
	}
}

func TestStateJSONRoundTrip(t *testing.T) {
	ff := testModel
	cfg := Config{Kp: 1, Ki: 0.01, Kd: 20, DerivativeFilter: 5 * time.Second, Min: 0, Max: 3000, Slew: 400,
		AntiWindup: AntiWindupConditional, SetpointFilter: 80 * time.Second, Feedforward: &ff, DelayAware: true,
		NoiseBand: 2, MeasurementMin: 0, MeasurementMax: 100}
	inputs := func(k int) Input {
		y := 40 + 30*math.Sin(float64(k)/7) + 0.1234567*float64(k%5)
		if k%13 == 0 {
			y = math.NaN()
		}
		return Input{Setpoint: 70 - float64(k/40)*20, Measurement: y, MeasurementAge: 150 * time.Second,
			MeasurementPeriod: time.Minute, SamplingInterval: time.Minute}
	}
	wantRestoredAlike[Controller](t, Controller{Config: cfg}, inputs, 60, 120)
}

// updater is a controller whose memory is saved as JSON: *Controller.
type updater[C any] interface {
	*C
	Update(Input) Output
}

// wantRestoredAlike updates orig with in(k) for ticks ticks, restores a copy
// from its JSON at tick at, and fails unless the copy's every output from
// then on is the original's.
func wantRestoredAlike[C any, P updater[C]](t *testing.T, orig C, in func(k int) Input, at, ticks int) {
	t.Helper()
	var restored C
	for k := range ticks {
		if k == at {
			b, err := json.Marshal(orig)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &restored); err != nil {
				t.Fatal(err)
			}
		}
		a := P(&orig).Update(in(k))
		if k >= at {
			if b := P(&restored).Update(in(k)); a != b {
				t.Fatalf("tick %d: restored controller gave %+v; original %+v", k, b, a)
			}
		}
	}
}

func TestAntiWindupMatters(t *testing.T) {
	// A disturbance that the output cannot reject (the rate hits 0) winds
	// up a PI; when it ends, the wound-up integrator overshoots.
	for _, aw := range []AntiWindup{AntiWindupConditional, AntiWindupBackCalculation} {
		cfg := Config{Kp: 1, Ki: 1.0 / (0.05 * 300), Min: 0, Max: 3000}
		plain := Controller{Config: cfg}
		cfg.AntiWindup = aw
		with := Controller{Config: cfg}
		a := closedLoop(&plain, testModel, 100, 80)
		b := closedLoop(&with, testModel, 100, 80)
		// After the disturbance ends (tick 60) the wound-up PI sits far
		// below its rate and recovers late.
		ia, ib := iae(a[60:], 70), iae(b[60:], 70)
		if !(ib < 0.6*ia) {
			t.Errorf("%s: IAE after the saturating disturbance %v with anti-windup, %v without; want clearly less", aw, ib, ia)
		}
	}
}

func TestSetpointFilterMatters(t *testing.T) {
	// With a feedforward built on a gain 15 % too low, the unfiltered
	// setpoint overshoots; the filtered one approaches slowly enough for
	// the delay-aware integrator to catch part of the error.
	wrong := testModel
	wrong.Gain = 0.05 * 0.85
	cfg := Config{Kp: 0.5, Ki: 1 / (wrong.Gain * 200), Min: 0, Max: 3000, AntiWindup: AntiWindupConditional,
		Feedforward: &wrong, DelayAware: true}
	nofilter := Controller{Config: cfg}
	cfg.SetpointFilter = 10 * time.Minute
	filtered := Controller{Config: cfg}
	a := maxOver(closedLoop(&nofilter, testModel, 40, 0), 0, 40, 70)
	b := maxOver(closedLoop(&filtered, testModel, 40, 0), 0, 40, 70)
	if !(b < a-2) {
		t.Fatalf("start overshoot %v with the setpoint filter, %v without; want at least 2 points less", b, a)
	}
}

func TestFeedforwardMatters(t *testing.T) {
	m := testModel
	cfg := Config{Kp: 0.5, Ki: 1 / (m.Gain * 300), Min: 0, Max: 3000, AntiWindup: AntiWindupConditional, SetpointFilter: time.Minute}
	fb := Controller{Config: cfg}
	cfg.Feedforward, cfg.DelayAware = &m, true
	ff := Controller{Config: cfg}
	a := iae(closedLoop(&fb, testModel, 40, 0), 70)
	b := iae(closedLoop(&ff, testModel, 40, 0), 70)
	if !(b < 0.5*a) {
		t.Fatalf("start-up IAE %v with feedforward, %v without; want less than half", b, a)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Kp: 1, Ki: 0.1, Min: 0, Max: 10}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Config{
		{Kp: -1, Max: 1}, {Kp: math.NaN(), Max: 1}, {Max: 0}, {Max: 1, AntiWindup: "x"}, {Max: 1, Mode: "x"},
		{Max: 1, DelayAware: true}, {Max: 1, Feedforward: &FOPDT{}}, {Max: 1, SetpointFilter: -1}, {Max: 1, NoiseBand: -1},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("config %d %+v: valid; want an error", i, c)
		}
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(1.0, 0.01, 0.0, 70.0, 50.0, int64(60), int64(150), true, uint8(1))
	f.Add(100.0, 10.0, 5.0, 0.0, math.NaN(), int64(1), int64(0), false, uint8(2))
	f.Add(1e6, 1e6, 1e6, 100.0, -5.0, int64(0), int64(-10), true, uint8(0))
	f.Fuzz(func(t *testing.T, kp, ki, kd, sp, y float64, dtS, ageS int64, ff bool, aw uint8) {
		m := testModel
		cfg := Config{Kp: math.Abs(kp), Ki: math.Abs(ki), Kd: math.Abs(kd), Min: 5, Max: 3000, Slew: 200,
			AntiWindup:     []AntiWindup{AntiWindupNone, AntiWindupConditional, AntiWindupBackCalculation}[aw%3],
			SetpointFilter: time.Minute, MeasurementMin: 0, MeasurementMax: 100, DerivativeFilter: time.Second}
		if ff {
			cfg.Feedforward, cfg.DelayAware, cfg.NoiseBand = &m, true, 2
		}
		if cfg.Validate() != nil {
			return
		}
		c := Controller{Config: cfg}
		for k := range 20 {
			in := Input{Setpoint: sp, Measurement: y + float64(k), SamplingInterval: time.Duration(dtS) * time.Second,
				MeasurementAge: time.Duration(ageS) * time.Second, MeasurementPeriod: time.Minute}
			out := c.Update(in)
			if math.IsNaN(out.Rate) || out.Rate < cfg.Min || out.Rate > cfg.Max {
				t.Fatalf("update %d: rate %v outside [%v, %v] (%+v)", k, out.Rate, cfg.Min, cfg.Max, out)
			}
		}
		// The state must always be saveable (encoding/json refuses NaN).
		if _, err := json.Marshal(c.State); err != nil {
			t.Fatalf("state cannot be saved: %v", err)
		}
	})
}

func TestNoWindupWhenThePlantTakesLess(t *testing.T) {
	cfg := Config{Ki: 0.5, Min: 0, Max: 3000, AntiWindup: AntiWindupConditional}
	c := Controller{Config: cfg}
	c.Update(Input{Setpoint: 70, Measurement: 40, SamplingInterval: time.Minute})
	before := c.State.Integral
	for range 10 {
		// The consumers processed only 100 msg/s of what was allowed.
		out := c.Update(Input{Setpoint: 70, Measurement: 40, SamplingInterval: time.Minute, ActualRate: 100, ActualKnown: true})
		if out.Integrated {
			t.Fatal("integrated upward while the plant could not take the output")
		}
	}
	if c.State.Integral != before {
		t.Fatalf("integral %v -> %v; want unchanged", before, c.State.Integral)
	}
	// Without anti-windup the textbook PI keeps integrating.
	cfg.AntiWindup = AntiWindupNone
	plain := Controller{Config: cfg}
	for range 10 {
		plain.Update(Input{Setpoint: 70, Measurement: 40, SamplingInterval: time.Minute, ActualRate: 100, ActualKnown: true})
	}
	if plain.State.Integral <= before {
		t.Fatalf("plain PI integral %v; want it wound up", plain.State.Integral)
	}
}

func TestSlewLimitedClimbNotTakenForALimitedPlant(t *testing.T) {
	// The consumers follow a climbing, slew-limited rate one update behind
	// (they read RATE during the interval): what they took is the output
	// before the last one, one slew step below it. That is not a plant
	// that cannot take the output: the rate climbs at the slew limit.
	c := Controller{Config: Config{Kp: 0.1, Ki: 0.3, Min: 3, Max: 60, Slew: 3, AntiWindup: AntiWindupConditional}}
	prev := 3.0
	for k := 1; k <= 15; k++ {
		before := c.State.Output
		if !c.State.Init {
			before = c.Config.Min
		}
		out := c.Update(Input{Setpoint: 21, Measurement: 3, SamplingInterval: 5 * time.Second, ActualRate: prev, ActualKnown: true})
		if want := 3 + 3*float64(k); math.Abs(out.Rate-want) > 1e-9 {
			t.Fatalf("update %d: rate %v; want %v (the slew limit's climb, the plant one update behind)", k, out.Rate, want)
		}
		prev = before
	}
	// A plant that takes clearly less than that (an empty queue taking 20
	// msg/s) still stops the climb, within one slew step of what it takes.
	for range 20 {
		c.Update(Input{Setpoint: 21, Measurement: 3, SamplingInterval: 5 * time.Second, ActualRate: 20, ActualKnown: true})
	}
	if got := c.State.Output; got > 48+1e-9 {
		t.Fatalf("plant taking 20 msg/s: rate %v; want the climb stopped (the rate was 48)", got)
	}
}

func TestBumplessFeedforwardChange(t *testing.T) {
	m := testModel
	cfg := Config{Kp: 0.5, Ki: 0.01, Min: 0, Max: 3000, AntiWindup: AntiWindupConditional, Feedforward: &m, DelayAware: true}
	in := func(age time.Duration) Input {
		return Input{Setpoint: 70, Measurement: 69, MeasurementAge: age, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute}
	}
	for _, tc := range []struct {
		name   string
		change func(c *Config)
	}{
		{"re-identified gain", func(c *Config) { g := m; g.Gain = 0.04; c.Feedforward = &g }},
		{"feedforward off", func(c *Config) { c.Feedforward, c.DelayAware = nil, false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Controller{Config: cfg}
			for range 30 {
				c.Update(in(150 * time.Second))
			}
			before := c.State.Output
			tc.change(&c.Config)
			// The same datapoint again: nothing new to integrate, so only
			// the change could move the output.
			out := c.Update(in(210 * time.Second))
			if math.Abs(out.Rate-before) > 1e-6*before {
				t.Fatalf("rate %v -> %v; want no bump", before, out.Rate)
			}
		})
	}
	// And on again: the histories restart from the present.
	c := Controller{Config: Config{Kp: 0.5, Ki: 0.01, Min: 0, Max: 3000}}
	for range 10 {
		c.Update(in(150 * time.Second))
	}
	before := c.State.Output
	c.Config.Feedforward, c.Config.DelayAware = &m, true
	out := c.Update(in(210 * time.Second))
	if math.IsNaN(out.Rate) || math.Abs(out.Rate-before) > 1e-6*max(1, before) {
		t.Fatalf("feedforward switched on: rate %v -> %v; want no bump", before, out.Rate)
	}
}

func TestConditionalAntiWindupReachesTheBound(t *testing.T) {
	// CPU stays below the setpoint and the rate climbs 15 msg/s per tick
	// toward max 1000: it must end at the bound, not one step inside it.
	c := Controller{Config: Config{Kp: 2, Ki: 0.025, Min: 0, Max: 1000, AntiWindup: AntiWindupConditional}}
	var out Output
	for range 100 {
		out = c.Update(Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute})
	}
	if out.Rate != 1000 || !out.Saturated {
		t.Fatalf("steady state with the error pushing up: rate %v (saturated %v); want the bound 1000, saturated", out.Rate, out.Saturated)
	}
}

func TestConditionalAntiWindupClimbsAtTheSlewLimit(t *testing.T) {
	// The measurement stays far below the setpoint and every integrator
	// step would take the output past the slew limit: the integrator
	// integrates as far as the slew limit lets the output go, so the rate
	// climbs one slew step per update to Max, and holds no more than the
	// output took (no windup once the error vanishes).
	c := Controller{Config: Config{Kp: 0.1, Ki: 0.3, Min: 3, Max: 60, Slew: 3, AntiWindup: AntiWindupConditional}}
	in := Input{Setpoint: 21, Measurement: 3, SamplingInterval: 5 * time.Second}
	for k := 1; k <= 25; k++ {
		out := c.Update(in)
		if want := math.Min(3+3*float64(k), 60); math.Abs(out.Rate-want) > 1e-9 {
			t.Fatalf("update %d: rate %v; want %v (one slew step of 3 per update up to max 60)", k, out.Rate, want)
		}
		if !out.Saturated {
			t.Fatalf("update %d: rate %v not reported saturated", k, out.Rate)
		}
		if p := out.P; out.I+p > out.Rate+1e-9 {
			t.Fatalf("update %d: integrator %v plus P %v holds more than the output %v took", k, out.I, p, out.Rate)
		}
	}
	// The measurement reaches the setpoint: P vanishes, the integrator
	// holds what the output took less P, nothing more.
	in.Measurement = 21
	if out := c.Update(in); out.Rate > 60-0.1*18+1e-9 {
		t.Fatalf("error gone: rate %v; want at most 58.2 (the integrator wound up past the bound)", out.Rate)
	}
}

func TestDerivativeUsesTimeBetweenDatapoints(t *testing.T) {
	// The measurement is a ramp of 0.01 points per second; datapoints are
	// 60 s averages published 90 s late, ticks every 60 s. Kd = 1 without a
	// filter makes D = -(slope the controller sees).
	const slope = 0.01
	ramp := func(end time.Duration) float64 { return 20 + slope*end.Seconds() }
	run := func(t *testing.T, ends []time.Duration, values []float64) Output {
		t.Helper()
		c := Controller{Config: Config{Kd: 1, Min: 0, Max: 3000, MeasurementMin: 0, MeasurementMax: 100}}
		var out Output
		for k, end := range ends {
			clock := time.Duration(k+1) * time.Minute // the controller's clock after this update
			out = c.Update(Input{Setpoint: 70, Measurement: values[k], MeasurementAge: clock - end,
				MeasurementPeriod: time.Minute, SamplingInterval: time.Minute})
		}
		return out
	}
	t.Run("after a publishing stall of 5 ticks", func(t *testing.T) {
		var ends []time.Duration
		var values []float64
		for k := range 10 {
			end := time.Duration(k+1)*time.Minute - 90*time.Second
			if k >= 4 && k < 9 {
				end = ends[3] // the newest datapoint stays the same
			}
			ends, values = append(ends, end), append(values, ramp(end))
		}
		if out := run(t, ends, values); math.Abs(-out.D-slope) > 0.05*slope {
			t.Fatalf("derivative after the stall = %v per s; want the slope %v within 5%%", -out.D, slope)
		}
	})
	t.Run("ignores an out-of-order datapoint", func(t *testing.T) {
		var ends []time.Duration
		var values []float64
		for k := range 8 {
			end := time.Duration(k+1)*time.Minute - 90*time.Second
			v := ramp(end)
			if k == 6 { // an older datapoint, with another value, arrives late
				end, v = ends[4], 90
			}
			ends, values = append(ends, end), append(values, v)
		}
		if out := run(t, ends, values); math.Abs(-out.D-slope) > 0.05*slope {
			t.Fatalf("derivative after an out-of-order datapoint = %v per s; want the slope %v within 5%%", -out.D, slope)
		}
	})
}

// saveable fails t unless the state encodes to JSON (encoding/json refuses
// NaN and Inf) and the rate is within the bounds.
func saveable(t *testing.T, what string, c *Controller, out Output) {
	t.Helper()
	if _, err := json.Marshal(c.State); err != nil {
		t.Fatalf("%s: state cannot be saved: %v (%+v)", what, err, c.State)
	}
	if !(out.Rate >= c.Config.Min && out.Rate <= c.Config.Max) {
		t.Fatalf("%s: rate %v outside [%v, %v]", what, out.Rate, c.Config.Min, c.Config.Max)
	}
}

func TestUpdateKeepsStateFinite(t *testing.T) {
	timed := func(y float64) Input {
		return Input{Setpoint: 70, Measurement: y, MeasurementAge: 90 * time.Second, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute}
	}
	t.Run("gain change", func(t *testing.T) {
		c := Controller{Config: Config{Kp: 1e308, Ki: 0.05, Kd: 1e308, Min: 0, Max: 3000}}
		if err := c.Config.Validate(); err != nil {
			t.Fatal(err)
		}
		for k := range 5 {
			saveable(t, "huge gains", &c, c.Update(timed(60+float64(k))))
		}
		c.Config.Kp, c.Config.Kd = 0.5, 0
		for range 5 {
			saveable(t, "after the gain change", &c, c.Update(timed(60)))
		}
	})
	t.Run("feedforward that overflows", func(t *testing.T) {
		m := FOPDT{Gain: 1e-310, Base: 1e308}
		c := Controller{Config: Config{Kp: 1, Ki: 0.05, Min: 0, Max: 3000, Feedforward: &m, DelayAware: true}}
		if err := c.Config.Validate(); err == nil {
			t.Error("Validate accepts a feedforward model whose inverse overflows")
		}
		for range 5 {
			saveable(t, "overflowing feedforward", &c, c.Update(timed(60)))
		}
		ok := testModel
		c.Config.Feedforward = &ok
		for range 5 {
			saveable(t, "after the model is fixed", &c, c.Update(timed(60)))
		}
	})
	// After an interval that overflows the clock, or a datapoint that ends
	// in the future, the integrator must go on taking new datapoints (the
	// first one after the odd one may count as older than it).
	for name, odd := range map[string]Input{
		"interval that overflows the clock": {Setpoint: 70, Measurement: 60, MeasurementAge: 90 * time.Second, MeasurementPeriod: time.Minute, SamplingInterval: math.MaxInt64},
		"negative measurement age":          {Setpoint: 70, Measurement: 60, MeasurementAge: -time.Hour, MeasurementPeriod: time.Minute, SamplingInterval: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			c := Controller{Config: Config{Kp: 1, Ki: 0.05, Min: 0, Max: 3000}}
			c.Update(timed(60))
			saveable(t, name, &c, c.Update(odd))
			before := c.State.Integral
			integrated := 0
			for range 5 {
				out := c.Update(timed(60))
				saveable(t, "after it", &c, out)
				if out.Integrated {
					integrated++
				}
			}
			if integrated < 4 || c.State.Integral <= before {
				t.Fatalf("integrated %d of 5 new datapoints, integral %v -> %v; want at least 4, rising", integrated, before, c.State.Integral)
			}
		})
	}
}

func TestConditionalBoundsEditedWhileSaturated(t *testing.T) {
	// Saturated at a bound for a long time, the bound is tightened: the rate
	// follows the new bound at the next update and leaves it at the first
	// update whose error turns (issue 15: the integrator is clamped into the
	// new bounds).
	in := func(y float64) Input { return Input{Setpoint: 70, Measurement: y, SamplingInterval: time.Minute} }
	for _, tc := range []struct {
		name      string
		y, turned float64 // CPU while saturated, and after the error turns
		edit      func(c *Config)
		bound     float64
		leftBound func(rate float64) bool
	}{
		{"max_rate lowered", 50, 75, func(c *Config) { c.Max = 500 }, 500, func(r float64) bool { return r < 500 }},
		{"min_rate raised", 95, 65, func(c *Config) { c.Min = 200 }, 200, func(r float64) bool { return r > 200 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Controller{Config: Config{Kp: 2, Ki: 0.05, Min: 0, Max: 1000, AntiWindup: AntiWindupConditional}}
			for range 60 {
				c.Update(in(tc.y))
			}
			tc.edit(&c.Config)
			if out := c.Update(in(tc.y)); out.Rate != tc.bound {
				t.Fatalf("next update after the edit: rate %v; want the new bound %v", out.Rate, tc.bound)
			}
			if out := c.Update(in(tc.turned)); !tc.leftBound(out.Rate) {
				t.Fatalf("the error turned: rate %v; want it off the bound %v at once", out.Rate, tc.bound)
			}
		})
	}
}

// appliedOver returns the delay-aware history's value for the interval
// before the last update.
func appliedOver(c *Controller, dt time.Duration) float64 {
	var v float64
	for _, s := range c.State.Applied {
		if s.At <= c.State.Clock-dt {
			v = s.Value
		}
	}
	return v
}

// TestHistoryHoldsTheRateCountedOutsideTheRatesInForce: a plant that took
// more than the output over an interval (Input.ActualCounted, a
// destination's members taking a margin) is given that in the delay-aware
// history; one that took a figure between the output and the averaged rate
// allowed (a rate stepped down, which the counts lag) keeps the output.
func TestHistoryHoldsTheRateCountedOutsideTheRatesInForce(t *testing.T) {
	ff := testModel
	c := Controller{Config: Config{Kp: 1, Ki: 0.01, Min: 0, Max: 3000, AntiWindup: AntiWindupConditional,
		Feedforward: &ff, DelayAware: true}}
	steady := Input{Setpoint: 70, Measurement: 70, SamplingInterval: time.Minute}
	for range 5 {
		c.Update(steady)
	}
	out := c.State.Output
	in := steady
	in.ActualRate, in.ActualKnown, in.ActualAllowed, in.ActualCounted = out, true, out, out+20
	c.Update(in)
	if got := appliedOver(&c, time.Minute); math.Abs(got-(out+20)) > 1e-9 {
		t.Errorf("history %v for the interval the plant took %v (output %v); want what it took", got, out+20, out)
	}
	// A setpoint stepped down: the counts and the average lag the new rate.
	in = Input{Setpoint: 50, Measurement: 70, SamplingInterval: time.Minute}
	c.Update(in)
	lower := c.State.Output
	in.ActualRate, in.ActualKnown, in.ActualAllowed, in.ActualCounted = lower+10, true, lower+50, lower+10
	c.Update(in)
	if got := appliedOver(&c, time.Minute); math.Abs(got-lower) > 1e-9 {
		t.Errorf("history %v after the output stepped down to %v (counted %v, allowed on average %v); want the output", got, lower, lower+10, lower+50)
	}
}
