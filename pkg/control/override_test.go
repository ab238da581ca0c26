package control

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// twoConstraints is a plant with two outputs: a CPU that follows the rate at
// once (10 % + 0.05 points per message/s) and the lag of a replica that
// applies capacity messages/s: the lag (seconds) is an integrating process
// that grows while the rate exceeds the capacity and shrinks while it is
// below, never below 0.
type twoConstraints struct {
	capacity float64
	cpu, lag float64
}

func (p *twoConstraints) step(rate float64, dt time.Duration) {
	p.cpu = 10 + 0.05*rate
	p.lag = math.Max(0, p.lag+(rate-p.capacity)/p.capacity*dt.Seconds())
}

func newOverride() *Override {
	base := Config{Min: 10, Max: 3000, Slew: 100, AntiWindup: AntiWindupConditional}
	cpu, lag := base, base
	cpu.Kp, cpu.Ki = 2, 0.02
	lag.Kp, lag.Ki = 10, 0.03
	return &Override{Controllers: map[string]*Controller{"cpu": {Config: cpu}, "lag": {Config: lag}}}
}

type overrideTick struct {
	out      OverrideOutput
	prevRate float64
	cpu, lag float64
}

// runOverride runs n one-minute ticks; capacity(i) is the replica's apply
// capacity at tick i.
func runOverride(o *Override, n int, capacity func(int) float64) []overrideTick {
	plant := &twoConstraints{}
	rate := 10.0
	var ticks []overrideTick
	for i := range n {
		plant.capacity = capacity(i)
		plant.step(rate, time.Minute)
		out := o.Update([]SignalInput{
			{Name: "cpu", Input: Input{Setpoint: 70, Measurement: plant.cpu, SamplingInterval: time.Minute}},
			{Name: "lag", Input: Input{Setpoint: 10, Measurement: plant.lag, SamplingInterval: time.Minute}},
		})
		ticks = append(ticks, overrideTick{out: out, prevRate: rate, cpu: plant.cpu, lag: plant.lag})
		rate = out.Rate
	}
	return ticks
}

// capacityDrop: the replica takes 2,000 messages/s (the CPU limits, at
// 1,200), slows to 800 between minutes 60 and 120 (the lag takes over),
// and recovers to 2,000 between minutes 200 and 260 (the CPU takes over
// again).
func capacityDrop(i int) float64 {
	switch {
	case i < 60:
		return 2000
	case i < 120:
		return 2000 - 20*float64(i-60)
	case i < 200:
		return 800
	case i < 260:
		return 800 + 20*float64(i-200)
	}
	return 2000
}

func TestOverrideSelectsLowestAndHandsOverBumplessly(t *testing.T) {
	ticks := runOverride(newOverride(), 300, capacityDrop)
	switches := 0
	for i, k := range ticks {
		lowest := math.Inf(1)
		for _, o := range k.out.Outputs {
			lowest = math.Min(lowest, o.Rate)
		}
		if k.out.Rate != lowest {
			t.Fatalf("tick %d: applied %v, lowest output %v", i, k.out.Rate, lowest)
		}
		if i > 0 && k.out.Limiting != ticks[i-1].out.Limiting {
			switches++
			if d := math.Abs(k.out.Rate - k.prevRate); d > 100+1e-9 {
				t.Errorf("tick %d: switch %s -> %s moved the rate by %.1f, more than the slew limit 100", i, ticks[i-1].out.Limiting, k.out.Limiting, d)
			}
		}
	}
	if switches < 2 {
		t.Fatalf("%d switches of the limiting signal; want cpu -> lag and lag -> cpu", switches)
	}
	// The lag is held at its setpoint while the replica limits, the CPU at
	// its own after.
	if k := ticks[190]; k.out.Limiting != "lag" || math.Abs(k.lag-10) > 1 || k.cpu > 70 {
		t.Errorf("minute 190: limiting %s, lag %.2f s (setpoint 10), cpu %.1f %%", k.out.Limiting, k.lag, k.cpu)
	}
	if k := ticks[299]; k.out.Limiting != "cpu" || math.Abs(k.cpu-70) > 0.5 {
		t.Errorf("minute 299: limiting %s, cpu %.2f %% (setpoint 70)", k.out.Limiting, k.cpu)
	}
}

// While the lag limits, the CPU controller (20 points below its setpoint)
// asks for the applied rate plus its proportional action, and no
// more however long it waits: its integrator does not wind up.
func TestOverrideNonSelectedDoesNotWindUp(t *testing.T) {
	o := newOverride()
	ticks := runOverride(o, 200, capacityDrop)
	kp, ki := o.Controllers["cpu"].Config.Kp, o.Controllers["cpu"].Config.Ki
	lagTicks := 0
	for i, k := range ticks[1:] {
		if ticks[i].out.Limiting != "lag" {
			continue
		}
		lagTicks++
		cpu := k.out.Outputs["cpu"]
		e := 70 - k.cpu
		if over := cpu.Rate - k.prevRate; over > kp*e+ki*e*60+1e-6 {
			t.Fatalf("tick %d: cpu controller asks %.1f above the applied rate, more than Kp e + Ki e dt = %.1f: it winds up", i+1, over, kp*e+ki*e*60)
		}
	}
	// The lag limits from when the replica falls below the rate the CPU
	// allows (about minute 103) to the end.
	if lagTicks < 90 {
		t.Fatalf("the lag limited %d ticks; the scenario wants it in charge from about minute 103", lagTicks)
	}
	// Without tracking (the plain minimum of the controllers) the CPU
	// controller's integrator runs to the maximum rate: the test above
	// would fail.
	naive := newOverride()
	plant := &twoConstraints{capacity: 800}
	rate := 10.0
	for range 200 {
		plant.step(rate, time.Minute)
		c := naive.Controllers["cpu"].Update(Input{Setpoint: 70, Measurement: plant.cpu, SamplingInterval: time.Minute})
		l := naive.Controllers["lag"].Update(Input{Setpoint: 10, Measurement: plant.lag, SamplingInterval: time.Minute})
		rate = math.Min(c.Rate, l.Rate)
	}
	if got := naive.Controllers["cpu"].State.Output; got < 2900 {
		t.Errorf("untracked cpu controller at %.0f; the windup this guards against did not show", got)
	}
}

// A held signal asks for what its stale policy allows: a fail-closed lag
// drops the rate to the safe rate and limits.
func TestOverrideStaleSignalFollowsItsPolicy(t *testing.T) {
	o := newOverride()
	runOverride(o, 60, capacityDrop)
	out := o.Update([]SignalInput{
		{Name: "cpu", Input: Input{Setpoint: 70, Measurement: 50, SamplingInterval: time.Minute}},
		{Name: "lag", Input: Input{Setpoint: 10, Measurement: math.NaN(), SamplingInterval: time.Minute},
			Stale: StalePolicy{Action: StaleFailClosed, SafeRate: 10}, StaleFor: time.Minute},
	})
	if out.Limiting != "lag" || out.Rate != 10 || !out.Outputs["lag"].Held {
		t.Fatalf("stale fail-closed lag: rate %v limiting %q held %v; want 10, lag, true", out.Rate, out.Limiting, out.Outputs["lag"].Held)
	}
	if got := o.Controllers["cpu"].State.Output; got != 10 {
		t.Errorf("cpu controller not told the applied rate: its output %v", got)
	}
}

// A signal that did not limit and goes blind with hold keeps asking what it
// asked: it does not take over, and the other signal keeps the rate.
func TestOverrideStaleHoldDoesNotTakeOver(t *testing.T) {
	o := newOverride()
	runOverride(o, 60, capacityDrop) // the CPU limits, the lag asks for more
	asked := o.Asked["lag"]
	for range 5 {
		out := o.Update([]SignalInput{
			{Name: "cpu", Input: Input{Setpoint: 70, Measurement: 69, SamplingInterval: time.Minute}},
			{Name: "lag", Input: Input{Setpoint: 10, Measurement: math.NaN(), SamplingInterval: time.Minute},
				Stale: StalePolicy{Action: StaleHold}, StaleFor: time.Minute},
		})
		if out.Limiting != "cpu" || out.Outputs["lag"].Rate != asked {
			t.Fatalf("blind lag with hold: limiting %s, lag asks %v; want cpu and %v as before", out.Limiting, out.Outputs["lag"].Rate, asked)
		}
	}
}

// A lag at 0 (its floor) says only that the replica keeps up: it does not
// hold the rate's rise back to its own integral speed; the CPU's controller
// raises the rate as fast as alone (its slew limit), and the lag takes part
// again, bumplessly, once it rises. The lag's controller here has a
// proportional action at 0 (Kp times the setpoint, 30) below the CPU's
// climb, so that without the floor rule it limits from the start.
func TestOverrideSignalAtFloorStaysOut(t *testing.T) {
	newOverride := func() *Override {
		o := newOverride()
		o.Controllers["lag"].Config.Kp = 3
		return o
	}
	run := func(floor bool) (rates []float64, limiting []string) {
		o := newOverride()
		plant := &twoConstraints{capacity: 800}
		rate := 10.0
		for range 40 {
			plant.step(rate, time.Minute)
			out := o.Update([]SignalInput{
				{Name: "cpu", Input: Input{Setpoint: 70, Measurement: plant.cpu, SamplingInterval: time.Minute}},
				{Name: "lag", Input: Input{Setpoint: 10, Measurement: plant.lag, SamplingInterval: time.Minute}, AtFloor: floor && plant.lag <= 0},
			})
			if d := out.Rate - rate; d > 100+1e-9 {
				t.Fatalf("floor %v: the rate rose by %.1f in one tick, more than the slew limit", floor, d)
			}
			rate = out.Rate
			rates, limiting = append(rates, rate), append(limiting, out.Limiting)
		}
		return rates, limiting
	}
	slow, _ := run(false)
	fast, lim := run(true)
	// The CPU's controller alone, on the same plant.
	alone := newOverride().Controllers["cpu"]
	plant := &twoConstraints{capacity: 800}
	rate := 10.0
	for i := range 6 {
		plant.step(rate, time.Minute)
		rate = alone.Update(Input{Setpoint: 70, Measurement: plant.cpu, SamplingInterval: time.Minute}).Rate
		if math.Abs(fast[i]-rate) > 1e-9 {
			t.Errorf("minute %d: %.1f with the lag at its floor; the CPU's controller alone gives %.1f", i+1, fast[i], rate)
		}
	}
	if slow[5] >= fast[5]-100 {
		t.Errorf("rate after 6 minutes: %.0f without the floor rule, %.0f with it; want the lag's integral speed to show without it", slow[5], fast[5])
	}
	if lim[5] != "cpu" || lim[39] != "lag" {
		t.Errorf("limiting at minute 6 %s, at minute 40 %s; want cpu, then the lag once the replica falls behind", lim[5], lim[39])
	}
}

// A controller that is not selected keeps its derivative action: a lag
// rising toward its setpoint makes it ask for less than the applied rate
// plus its proportional action, so that it takes over before the lag
// reaches its setpoint (the anticipation a derivative is for), not when
// the lag crosses it.
func TestOverrideNonSelectedDerivativeAnticipates(t *testing.T) {
	takeover := func(kd float64) (lag float64) {
		o := newOverride()
		o.Controllers["lag"].Config.Kd = kd
		for k := range 30 {
			lag := 0.5 * float64(k) // 0.5 s per one-minute tick
			out := o.Update([]SignalInput{
				{Name: "cpu", Input: Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute}},
				{Name: "lag", Input: Input{Setpoint: 10, Measurement: lag, SamplingInterval: time.Minute}},
			})
			if k > 0 && out.Limiting == "lag" {
				return lag
			}
		}
		return math.Inf(1)
	}
	// Kd 6000 s: D = -Kd x slope = -50 msg/s, against P = 10 (10 - lag)
	// and the CPU's climb of 12 msg/s per tick.
	with, without := takeover(6000), takeover(0)
	if with > 5 || without < 9 {
		t.Fatalf("the lag took over at %.1f s with kd, at %.1f s without; want at most 5 s with kd (its derivative anticipates), at least 9 without", with, without)
	}
}

// At a hand-over the rate the new signal's controller applies includes its
// derivative term: for a replication lag, the rate's excess over what the
// replica applies, which its slope shows. Its integrator, which tracked the
// rate applied, keeps that correction: once the lag stops rising (the
// derivative back at 0) the rate stays at what the hand-over applied, plus
// the proportional and integral terms' own moves, instead of returning to
// the rate in force before the hand-over, which the lag had shown too high.
func TestOverrideHandOverKeepsTheDerivativesCorrection(t *testing.T) {
	o := newOverride()
	o.Controllers["lag"].Config.Kd = 6000
	var before, handed, lag float64
	var d float64
	k := 0
	for ; k < 30; k++ {
		lag = 0.5 * float64(k) // 0.5 s per one-minute tick: D = -6000 x 0.5/60 = -50 msg/s
		out := o.Update([]SignalInput{
			{Name: "cpu", Input: Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute}},
			{Name: "lag", Input: Input{Setpoint: 10, Measurement: lag, SamplingInterval: time.Minute}},
		})
		if k > 0 && out.Limiting == "lag" {
			handed, d = out.Rate, out.Outputs["lag"].D
			break
		}
		before = out.Rate
	}
	if handed == 0 || d >= 0 {
		t.Fatalf("hand-over at tick %d: rate %.1f after %.1f with D %.1f; want a hand-over to the lag while it rises", k, handed, before, d)
	}
	// The lag holds still: no slope, the same proportional term.
	out := o.Update([]SignalInput{
		{Name: "cpu", Input: Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute}},
		{Name: "lag", Input: Input{Setpoint: 10, Measurement: lag, SamplingInterval: time.Minute}},
	})
	lc := o.Controllers["lag"].Config
	integral := lc.Ki * (10 - lag) * 60 // this minute's integral step
	if want := handed + integral; out.Limiting != "lag" || out.Rate > want+1e-6 {
		t.Fatalf("the minute after the hand-over (lag steady at %.1f s): rate %.1f limited by %s; want at most %.1f by lag (the hand-over's %.1f, D %.1f kept, plus the integral's %.2f), not back toward %.1f",
			lag, out.Rate, out.Limiting, want, handed, d, integral, before)
	}
}

// A signal at its floor says nothing of how far the rate may rise: it never
// limits while another signal is off its floor. Here the CPU's controller
// starts from its feedforward's rate (40 msg/s) and the lag's from min_rate
// (10): the lag at 0 asks for less than the CPU and, were it selected,
// would keep the label once it leaves the floor (0.5 s, both asking for more
// than one slew step) and climb at its own integral speed (17 msg/s a tick)
// instead of the slew limit.
func TestOverrideSignalAtFloorNeverLimits(t *testing.T) {
	o := newOverride()
	ff := FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second}
	o.Controllers["cpu"].Config.Feedforward = &ff
	plant := &twoConstraints{capacity: 2000}
	rate := 40.0
	for k := range 6 {
		plant.step(rate, time.Minute)
		lag := 0.5
		if k == 0 {
			lag = 0
		}
		out := o.Update([]SignalInput{
			{Name: "cpu", Input: Input{Setpoint: 70, Measurement: plant.cpu, SamplingInterval: time.Minute}},
			{Name: "lag", Input: Input{Setpoint: 10, Measurement: lag, SamplingInterval: time.Minute}, AtFloor: lag <= 0},
		})
		if want := rate + 100; out.Limiting != "cpu" || math.Abs(out.Rate-want) > 1e-9 {
			t.Fatalf("minute %d: rate %.1f limited by %s; want %.1f by cpu, one slew step more (both signals ask for more)", k+1, out.Rate, out.Limiting, want)
		}
		rate = out.Rate
	}
}

func TestOverrideRoundTripsThroughJSON(t *testing.T) {
	a := newOverride()
	runOverride(a, 50, capacityDrop)
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var c Override
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	in := []SignalInput{
		{Name: "cpu", Input: Input{Setpoint: 70, Measurement: 52, SamplingInterval: time.Minute}},
		{Name: "lag", Input: Input{Setpoint: 10, Measurement: 9, SamplingInterval: time.Minute}},
	}
	x, y := a.Update(in), c.Update(in)
	if x.Rate != y.Rate || x.Limiting != y.Limiting {
		t.Errorf("restored override: %v %s; original %v %s", y.Rate, y.Limiting, x.Rate, x.Limiting)
	}
}

// A signal with a measured feedforward (the rate a replica applies, for its
// lag) asks for it plus its own terms whether it limits or not: it does not
// track the rate in force, and its integrator does not move while another
// signal limits. It takes over as soon as the rate in force is above that,
// before the lag crosses its setpoint, instead of from a rate far above
// the replica's pace once it has.
func TestOverrideMeasuredFeedforwardAsksForThePace(t *testing.T) {
	o := newOverride()
	o.Controllers["lag"].Config.Kp, o.Controllers["lag"].Config.Ki = 2, 0.001
	const pace = 400.0     // the replica's measured pace, messages/s
	lag, prev := 0.5, 10.0 // prev: the rate applied at the last tick (min_rate before the first)
	var out OverrideOutput
	for k := 0; k < 100 && out.Limiting != "lag"; k++ {
		out = o.Update([]SignalInput{
			{Name: "cpu", Input: Input{Setpoint: 70, Measurement: 60, SamplingInterval: time.Minute}},
			{Name: "lag", Input: Input{Setpoint: 10, Measurement: lag, SamplingInterval: time.Minute, Feedforward: pace, FeedforwardKnown: true}},
		})
		l := out.Outputs["lag"]
		// Its integrator: this update's step at most, not kept.
		step := 0.001 * (10 - lag) * 60
		if out.Limiting == "cpu" && (l.FF != pace || math.Abs(l.I) > step+1e-9 || math.Abs(l.Rate-min(pace+2*(10-lag)+l.I, prev+100)) > 1e-9) {
			t.Fatalf("tick %d, the CPU limiting at %.1f: the lag asked %.2f (FF %.1f, I %.2f); want the pace %.0f plus its P %.1f and one integral step (slew limited)", k, out.Rate, l.Rate, l.FF, l.I, pace, 2*(10-lag))
		}
		// The lag grows while the rate is above the replica's pace.
		lag, prev = max(0.5, lag+(out.Rate-pace)/pace*60), out.Rate
	}
	if out.Limiting != "lag" || lag >= 10 || out.Rate > pace+2*10 {
		t.Fatalf("the lag took over at %.1f s (setpoint 10) with the rate %.1f: %+v; want it below its setpoint, at most its P above the pace", lag, out.Rate, out)
	}
}

// Without a model, a measured feedforward is the controller's FF; with a
// model (reference feedforward) the model's.
func TestMeasuredFeedforwardOnlyWithoutAModel(t *testing.T) {
	c := &Controller{Config: Config{Kp: 1, Ki: 0.1, Min: 0, Max: 1000}}
	out := c.Update(Input{Setpoint: 10, Measurement: 10, SamplingInterval: time.Second, Feedforward: 250, FeedforwardKnown: true})
	if out.FF != 250 || out.Rate != 250 {
		t.Fatalf("no model: FF %.1f, rate %.1f; want 250 and 250", out.FF, out.Rate)
	}
	m := &Controller{Config: Config{Kp: 1, Ki: 0.1, Min: 0, Max: 1000, Feedforward: &FOPDT{Gain: 0.1, Tau: time.Second}}}
	if out := m.Update(Input{Setpoint: 10, Measurement: 10, SamplingInterval: time.Second, Feedforward: 250, FeedforwardKnown: true}); out.FF != 100 {
		t.Fatalf("with a model: FF %.1f, want the model's 100", out.FF)
	}
}
