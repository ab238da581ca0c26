package dbload

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// Disturber is load from outside the loop that can be switched on and off
// (*LoadGenerator).
type Disturber interface {
	Start(ctx context.Context) error
	Stop()
}

var _ Disturber = (*LoadGenerator)(nil)

// Lab runs the lab's experiments on the real database in real time: the
// plant's consumers store messages at the allowed rate, CPU measures the
// database's CPU every Step (the "true" CPU of the lab's measures), and a
// CloudWatch-like pipeline (sim.Pipeline: period averages published after a
// delay) turns those readings into what the controller sees, exactly as in
// the simulated lab. Disturb adds the outside load of the scenario's
// disturbances (their Size is nominal: the real load is whatever Disturb
// costs the database).
type Lab struct {
	Plant   *Plant
	CPU     cpupub.CPUReader
	Disturb Disturber
	// Step is the sampling period of the true CPU (default 1s).
	Step time.Duration
	// Progress, when set, sees every sample.
	Progress func(t time.Duration, cpu, allowed, processed float64)
}

func (l *Lab) step() time.Duration {
	return defaults.Positive(l.Step, time.Second)
}

// sampler keeps the previous CPU reading and the plant's stored count.
type sampler struct {
	l          *Lab
	prev       cpupub.Sample
	prevStored int64
}

func (l *Lab) newSampler() (*sampler, error) {
	s, err := l.CPU.Sample()
	if err != nil {
		return nil, err
	}
	_, stored, _ := l.Plant.Counts()
	return &sampler{l: l, prev: s, prevStored: stored}, nil
}

// next waits until deadline and returns the CPU and processed rate since
// the previous reading.
func (s *sampler) next(ctx context.Context, deadline time.Time) (cpu, processed float64, err error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-t.C:
	}
	cur, err := s.l.CPU.Sample()
	if err != nil {
		return 0, 0, err
	}
	cpu, err = s.l.CPU.Utilization(s.prev, cur)
	if err != nil {
		return 0, 0, err
	}
	_, stored, _ := s.l.Plant.Counts()
	processed = float64(stored-s.prevStored) / cur.At.Sub(s.prev.At).Seconds()
	s.prev, s.prevStored = cur, stored
	return cpu, processed, nil
}

// StepTest runs an open-loop step test: the allowed rate is st.From until
// st.At, then st.To, until st.Duration. It returns one sample per Step: T
// the middle of the sampling interval (s), U the rate the database
// actually took over it (messages/s), Y its CPU (percent).
func (l *Lab) StepTest(ctx context.Context, st sim.StepTest) (ident.Data, error) {
	if st.Duration <= st.At || st.At <= 0 {
		return ident.Data{}, fmt.Errorf("step test: the step at %v must fall inside the test's %v", st.At, st.Duration)
	}
	h := l.step()
	if err := l.Plant.Start(ctx, st.From); err != nil {
		return ident.Data{}, err
	}
	defer l.Plant.Stop()
	smp, err := l.newSampler()
	if err != nil {
		return ident.Data{}, err
	}
	start := time.Now()
	var d ident.Data
	for k := 1; time.Duration(k)*h <= st.Duration; k++ {
		t := time.Duration(k) * h
		if t-h >= st.At {
			l.Plant.SetRate(st.To)
		}
		cpu, processed, err := smp.next(ctx, start.Add(t))
		if err != nil {
			return d, fmt.Errorf("step test at %v: %w", t, err)
		}
		d.T = append(d.T, (t - h/2).Seconds())
		d.U = append(d.U, processed)
		d.Y = append(d.Y, cpu)
		if l.Progress != nil {
			l.Progress(t, cpu, l.Plant.Rate(), processed)
		}
	}
	return d, nil
}

// RunResult is a closed-loop run on the real plant.
type RunResult struct {
	Series  sim.Series
	Counts  sim.Counts
	Metrics sim.Metrics
	// Rows and Distinct are this run's rows in the messages table;
	// Duplicates = Rows - Distinct.
	Rows, Distinct int64
	// StoreRetries counts failed inserts that were retried.
	StoreRetries int64
}

// Run runs scenario s under policy p on the real plant, in real time, as
// sim.Run does on the simulated one: at every tick the policy sees the
// newest published datapoint and sets the allowed rate (bounded by
// [0, s.MaxRate]); the scenario's disturbances switch Disturb on and off.
// The backlog is endless (the producers always outpace the loop), so
// Counts.Produced is what the consumers took; a message is lost when it
// was taken and is not in the database at the end.
func (l *Lab) Run(ctx context.Context, s sim.Scenario, p sim.Policy) (RunResult, error) {
	h := l.step()
	if s.Tick%h != 0 || s.MetricPeriod%h != 0 {
		return RunResult{}, fmt.Errorf("tick %v and metric period %v must be multiples of the step %v", s.Tick, s.MetricPeriod, h)
	}
	// The database's CPU before the run is the pipeline's history.
	smp, err := l.newSampler()
	if err != nil {
		return RunResult{}, err
	}
	y0, _, err := smp.next(ctx, time.Now().Add(2*h))
	if err != nil {
		return RunResult{}, err
	}
	r := &realRun{l: l, s: s, p: p, h: h, smp: smp, pipe: sim.NewPipeline(s.MetricPeriod, s.MetricDelay, 0, nil, y0), lastTick: -s.Tick}
	if err := l.Plant.Start(ctx, 0); err != nil {
		return RunResult{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			l.Plant.Stop()
		}
	}()
	defer func() {
		if r.disturbing {
			l.Disturb.Stop()
		}
	}()
	if err := r.loop(ctx); err != nil {
		return RunResult{}, err
	}
	l.Plant.Stop()
	stopped = true
	taken, _, retries := l.Plant.Counts()
	rows, distinct, err := l.Plant.CountStored(context.WithoutCancel(ctx))
	if err != nil {
		return RunResult{}, err
	}
	c := sim.Counts{Produced: taken, Processed: distinct}
	return RunResult{Series: r.ser, Counts: c, Metrics: sim.Measure(s, r.ser, c), Rows: rows, Distinct: distinct, StoreRetries: retries}, nil
}

// realRun is the state of one closed-loop run on the real plant (Run).
type realRun struct {
	l     *Lab
	s     sim.Scenario
	p     sim.Policy
	h     time.Duration
	smp   *sampler
	pipe  *sim.Pipeline
	ser   sim.Series
	start time.Time

	allowed       float64
	lastTick      time.Duration
	doneSinceTick float64 // messages processed since the last tick
	disturbing    bool
}

// loop runs the scenario's steps in real time.
func (r *realRun) loop(ctx context.Context) error {
	l, s, h := r.l, r.s, r.h
	n := int(s.Duration / h)
	r.start = time.Now()
	var err error
	if r.smp.prev, err = l.CPU.Sample(); err != nil {
		return err
	}
	_, r.smp.prevStored, _ = l.Plant.Counts()
	for k := 0; k < n; k++ {
		t := time.Duration(k) * h
		r.pipe.Publish(t)
		if err := r.disturb(ctx, t); err != nil {
			return err
		}
		if t-r.lastTick >= s.Tick {
			if err := r.tick(k, t); err != nil {
				return err
			}
		}
		if err := r.sample(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// disturb switches the outside load on or off as the scenario's
// disturbances say at t.
func (r *realRun) disturb(ctx context.Context, t time.Duration) error {
	l := r.l
	if on := r.s.DisturbanceAt(t) != 0; on != r.disturbing && l.Disturb != nil {
		if on {
			if err := l.Disturb.Start(ctx); err != nil {
				return fmt.Errorf("start disturbance: %w", err)
			}
		} else {
			l.Disturb.Stop()
		}
		r.disturbing = on
	}
	return nil
}

// tick is the controller's tick at step k (time t): the policy sees the
// newest published datapoint and sets the allowed rate, bounded by
// [0, MaxRate].
func (r *realRun) tick(k int, t time.Duration) error {
	s := r.s
	dp, ok := r.pipe.Latest()
	// Processed is the rate the database really took since the
	// last tick, which the controller tracks (as sim.Run does).
	obs := sim.Observation{Now: t, Interval: t - r.lastTick, Setpoint: s.SetpointAt(t), Datapoint: dp, OK: ok,
		Processed: r.doneSinceTick / (t - r.lastTick).Seconds()}
	if k == 0 {
		obs.Processed = 0
	}
	r.doneSinceTick = 0
	allowed := r.p.Rate(obs)
	if math.IsNaN(allowed) {
		return fmt.Errorf("policy returned NaN at %v", t)
	}
	r.allowed = math.Max(0, math.Min(s.MaxRate, allowed))
	r.l.Plant.SetRate(r.allowed)
	r.lastTick = t
	return nil
}

// sample waits for the end of the step from t, reads the database's CPU
// and processed rate over it, and records them.
func (r *realRun) sample(ctx context.Context, t time.Duration) error {
	h := r.h
	cpu, processed, err := r.smp.next(ctx, r.start.Add(t+h))
	if err != nil {
		return fmt.Errorf("run at %v: %w", t, err)
	}
	r.pipe.Observe(t, h, cpu)
	r.doneSinceTick += processed * h.Seconds()
	meas := math.NaN()
	if dp, ok := r.pipe.Latest(); ok {
		meas = dp.Value
	}
	ser := &r.ser
	ser.T = append(ser.T, (t + h).Seconds())
	ser.Setpoint = append(ser.Setpoint, r.s.SetpointAt(t))
	ser.CPU = append(ser.CPU, cpu)
	ser.Measured = append(ser.Measured, meas)
	ser.Allowed = append(ser.Allowed, r.allowed)
	ser.Processed = append(ser.Processed, processed)
	if r.l.Progress != nil {
		r.l.Progress(t+h, cpu, r.allowed, processed)
	}
	return nil
}
