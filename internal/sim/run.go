package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/pkg/ident"
)

// Observation is what a controller sees at a tick: the scenario's setpoint
// and the newest published datapoint, never the true CPU.
type Observation struct {
	// Now is the time of the tick since the start of the run.
	Now time.Duration
	// Interval is the time since the previous tick (the tick at the first).
	Interval time.Duration
	// Setpoint is the CPU setpoint in force.
	Setpoint float64
	// Datapoint is the newest published datapoint; OK is false when none
	// has been published yet.
	Datapoint Datapoint
	OK        bool
	// Processed is the rate the consumers really processed since the
	// previous tick, messages/s (what the consumers report; below the
	// allowed rate when the queue ran dry).
	Processed float64
	// Signals are the plant's other outputs, as their metrics show them
	// (the replica's lag when the scenario has a replica); nil otherwise.
	Signals []SignalObservation
	// Withheld is the rate an InnerPolicy's inner loop withheld since the
	// previous tick from consumers that had messages to take, messages/s
	// (0 without one).
	Withheld float64
}

// SignalObservation is what a tick sees of one more plant output: its
// setpoint and its newest published datapoint (OK false when none yet).
type SignalObservation struct {
	Name      string
	Setpoint  float64
	Datapoint Datapoint
	OK        bool
}

// Age is how long before Now the datapoint's averaging period ended.
func (o Observation) Age() time.Duration { return o.Now - o.Datapoint.End() }

// Policy sets the allowed rate at each tick: a controller in the lab.
type Policy interface {
	Rate(o Observation) float64
}

// Limiter is a Policy that tells, after each Rate, which signal set the rate
// (override control); the run records it in Series.Limiting.
type Limiter interface {
	Limiting() string
}

// InnerPolicy is a Policy whose consumers run an inner loop: at every
// integration step it sees the latency per message of the batch the
// destination just completed (seconds; NaN when none) and how many messages
// it held, and returns the pace the consumers take at, at most allowed.
type InnerPolicy interface {
	Pace(t time.Duration, allowed, latency float64, done int64) float64
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(o Observation) float64

// Rate calls f.
func (f PolicyFunc) Rate(o Observation) float64 { return f(o) }

// Series is a run's time series, one entry per integration step.
type Series struct {
	T         []float64 `json:"t_s"`       // end of the step, seconds
	Setpoint  []float64 `json:"setpoint"`  // percent
	CPU       []float64 `json:"cpu"`       // true CPU, percent
	Measured  []float64 `json:"measured"`  // newest published datapoint, percent (NaN before the first)
	Allowed   []float64 `json:"allowed"`   // allowed rate, messages/s
	Processed []float64 `json:"processed"` // processed rate, messages/s
	// Lag and LagMeasured are the replica's true and published lag,
	// seconds (NaN before the first datapoint), when the scenario has a
	// replica.
	Lag         []float64 `json:"lag,omitempty"`
	LagMeasured []float64 `json:"lag_measured,omitempty"`
	// Limiting is the signal that set the allowed rate, when the policy is
	// a Limiter.
	Limiting []string `json:"limiting,omitempty"`
	// Latency is the latency per message the consumers saw, milliseconds,
	// when the scenario has a latency; Paced the pace the consumers took
	// at, messages/s, under an InnerPolicy.
	Latency []float64 `json:"latency_ms,omitempty"`
	Paced   []float64 `json:"paced,omitempty"`
}

// Result is a closed-loop run.
type Result struct {
	Series  Series  `json:"series"`
	Counts  Counts  `json:"counts"`
	Metrics Metrics `json:"metrics"`
}

// options of Run, for tests.
type runOptions struct{ dropEvery int }

// Run simulates scenario s under policy p. It is deterministic for s.Seed.
func Run(s Scenario, p Policy) (Result, error) { return run(s, p, runOptions{}) }

func run(s Scenario, p Policy, opt runOptions) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, fmt.Errorf("scenario: %w", err)
	}
	r := newLoopRun(s, p, opt)
	n := int(s.Duration / r.h)
	r.ser = newSeries(n, s.Replica != nil)
	for k := 0; k < n; k++ {
		t := time.Duration(k) * r.h
		r.pipe.Publish(t)
		if r.lag != nil {
			r.lag.pipe.Publish(t)
		}
		if t-r.lastTick >= s.Tick {
			if err := r.tick(k, t); err != nil {
				return Result{}, err
			}
		}
		r.advance(t)
	}
	counts := Counts{
		Produced:  s.Backlog + r.prod.sent,
		Processed: r.dst.processed,
		InFlight:  r.cons.inFlight,
		Queued:    r.q.length,
	}
	return Result{Series: r.ser, Counts: counts, Metrics: Measure(s, r.ser, counts)}, nil
}

// loopRun is the state of one closed-loop simulation (run): the plant,
// its metric pipeline, the traffic, the policy and what it last allowed,
// and the series recorded so far.
type loopRun struct {
	s      Scenario
	p      Policy
	h      time.Duration
	hs     float64 // h in seconds
	plant  *Plant
	pipe   *Pipeline
	prod   *producers
	q      *queue
	cons   *consumers
	dst    sink
	lag    *lagMeter // nil without a replica
	ser    Series
	lim    Limiter
	isLim  bool
	limits string // the signal that limited the rate at the last tick

	allowed       float64
	lastTick      time.Duration
	doneSinceTick int64

	lat          *LatencyMeter // nil without a latency
	inner        InnerPolicy   // nil unless p is one
	latency      float64       // the newest step's latency per message, seconds
	withheldTick float64       // messages withheld since the last tick
}

func newLoopRun(s Scenario, p Policy, opt runOptions) *loopRun {
	h := s.step()
	rng := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	plant := NewPlant(s.Plant, h, 0)
	r := &loopRun{s: s, p: p, h: h, hs: h.Seconds(), plant: plant,
		pipe: NewPipeline(s.MetricPeriod, s.MetricDelay, s.Noise, rng, plant.CPU(0)),
		prod: &producers{rate: s.ProducerRate}, q: &queue{length: s.Backlog}, cons: &consumers{dropEvery: opt.dropEvery},
		lastTick: -s.Tick}
	if s.Replica != nil {
		r.lag = newLagMeter(*s.Replica)
	}
	r.lim, r.isLim = p.(Limiter)
	if s.Latency != nil {
		r.lat = NewLatencyMeter(*s.Latency, s.Seed)
		r.inner, _ = p.(InnerPolicy)
	}
	r.latency = math.NaN()
	return r
}

// newSeries is a series with room for n steps, with the lag's when
// replica.
func newSeries(n int, replica bool) Series {
	ser := Series{
		T: make([]float64, 0, n), Setpoint: make([]float64, 0, n), CPU: make([]float64, 0, n),
		Measured: make([]float64, 0, n), Allowed: make([]float64, 0, n), Processed: make([]float64, 0, n),
	}
	if replica {
		ser.Lag, ser.LagMeasured = make([]float64, 0, n), make([]float64, 0, n)
	}
	return ser
}

// tick is the controller's tick at step k (time t): the policy sees the
// newest datapoints and the rate processed since the last tick, and sets
// the allowed rate, bounded by [0, MaxRate].
func (r *loopRun) tick(k int, t time.Duration) error {
	s := r.s
	dp, ok := r.pipe.Latest()
	obs := Observation{Now: t, Interval: t - r.lastTick, Setpoint: s.SetpointAt(t), Datapoint: dp, OK: ok,
		Processed: float64(r.doneSinceTick) / (t - r.lastTick).Seconds(),
		Withheld:  r.withheldTick / (t - r.lastTick).Seconds()}
	if k == 0 {
		obs.Processed, obs.Withheld = 0, 0
	}
	r.doneSinceTick, r.withheldTick = 0, 0
	if r.lag != nil {
		dp, ok := r.lag.pipe.Latest()
		obs.Signals = []SignalObservation{{Name: SignalLag, Setpoint: s.Replica.Setpoint, Datapoint: dp, OK: ok}}
	}
	allowed := r.p.Rate(obs)
	if r.isLim {
		r.limits = r.lim.Limiting()
	}
	if math.IsNaN(allowed) {
		return fmt.Errorf("policy returned NaN at %v", t)
	}
	r.allowed = math.Max(0, math.Min(s.MaxRate, allowed))
	r.lastTick = t
	return nil
}

// advance integrates one step from t: the producers and bursts fill the
// queue, the consumers drain it at the allowed rate, the plant takes what
// they processed, and the step's values are recorded.
func (r *loopRun) advance(t time.Duration) {
	s, h, hs := r.s, r.h, r.hs
	r.prod.rate = s.ProducerRateAt(t)
	burst := s.BurstsIn(t, t+h)
	r.prod.sent += burst
	r.q.push(r.prod.produce(hs) + burst)
	pace := r.pace(t)
	done, _ := r.cons.step(r.q, pace, hs)
	r.dst.complete(done)
	r.doneSinceTick += done
	if len(s.PlantChanges) > 0 {
		r.plant.SetModel(s.PlantAt(t))
	}
	cpu := r.plant.Step(float64(done)/hs, s.DisturbanceAt(t))
	r.pipe.Observe(t, h, cpu)
	r.observeLatency(t, cpu, done, pace)

	ser := &r.ser
	ser.T = append(ser.T, (t + h).Seconds())
	ser.Setpoint = append(ser.Setpoint, s.SetpointAt(t))
	ser.CPU = append(ser.CPU, cpu)
	ser.Measured = append(ser.Measured, latestValue(r.pipe))
	ser.Allowed = append(ser.Allowed, r.allowed)
	ser.Processed = append(ser.Processed, float64(done)/hs)
	if r.lag != nil {
		ser.Lag = append(ser.Lag, r.lag.step(t, h, float64(done)/hs))
		ser.LagMeasured = append(ser.LagMeasured, latestValue(r.lag.pipe))
	}
	if r.isLim {
		ser.Limiting = append(ser.Limiting, r.limits)
	}
}

// latestValue is the newest published datapoint's value, NaN before the
// first.
func latestValue(p *Pipeline) float64 {
	if dp, ok := p.Latest(); ok {
		return dp.Value
	}
	return math.NaN()
}

// StepTest describes an open-loop step test: the rate is From until At, then
// To, until Duration.
type StepTest struct {
	From     float64       `json:"from"`
	To       float64       `json:"to"`
	At       time.Duration `json:"at"`
	Duration time.Duration `json:"duration"`
}

// RunStepTest runs an open-loop step test on the scenario's plant and metric
// pipeline (without its disturbances) and returns the datapoints as an
// identification data set: T is the middle of each datapoint's averaging
// period (seconds), U the rate in force at T, Y the datapoint. The step is
// moved to the middle of the period that contains At, so that it falls on a
// sample time.
func RunStepTest(s Scenario, st StepTest) (ident.Data, error) {
	s.Disturbances = nil
	if err := s.Validate(); err != nil {
		return ident.Data{}, fmt.Errorf("scenario: %w", err)
	}
	switch {
	case math.IsNaN(st.From) || math.IsNaN(st.To) || math.IsInf(st.From, 0) || math.IsInf(st.To, 0) || st.From < 0 || st.To < 0:
		return ident.Data{}, fmt.Errorf("step from %v to %v messages/s: rates must be finite and >= 0", st.From, st.To)
	case st.From == st.To:
		return ident.Data{}, fmt.Errorf("step from %v to %v messages/s: no step", st.From, st.To)
	case st.At <= 0 || st.Duration <= st.At:
		return ident.Data{}, fmt.Errorf("step at %v in a test of %v: the step must come after the start and before the end", st.At, st.Duration)
	case st.Duration > 7*24*time.Hour:
		return ident.Data{}, fmt.Errorf("step test of %v: at most 7 days", st.Duration)
	}
	h := s.step()
	p := s.MetricPeriod
	at := st.At/p*p + p/2
	rng := rand.New(rand.NewPCG(s.Seed, 0x57e9))
	plant := NewPlant(s.Plant, h, st.From)
	pipe := NewPipeline(p, 0, s.Noise, rng, plant.CPU(0))
	var d ident.Data
	var last time.Duration = math.MinInt64
	n := int(st.Duration / h)
	for k := 0; k < n; k++ {
		t := time.Duration(k) * h
		u := st.From
		if t >= at {
			u = st.To
		}
		pipe.Observe(t, h, plant.Step(u, 0))
		pipe.Publish(t + h)
		if dp, ok := pipe.Latest(); ok && dp.Start >= 0 && dp.Start > last {
			last = dp.Start
			mid := dp.Start + p/2
			ui := st.From
			if mid >= at {
				ui = st.To
			}
			d.T = append(d.T, mid.Seconds())
			d.U = append(d.U, ui)
			d.Y = append(d.Y, dp.Value)
		}
	}
	return d, nil
}
