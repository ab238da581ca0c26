// Package demo is the dashboard's embedded demo: one loop whose controller
// (pkg/control's PID with reference feedforward, conditional anti-windup and a
// stale-metric policy) drives a simulated destination through a
// CloudWatch-like metric pipeline, with in-memory parameters and history, in
// accelerated time. It needs no service at all.
//
// The simulated world follows DESIGN.md's reference scenario: a plant of gain
// 0.05 points of CPU per message/s over a 10 % base load, a 15 s lag and 5 s
// dead time, saturating at 100 % CPU; 60 s metric averages published 90 s
// after their period ends; a 60 s controller tick. To keep a newcomer's
// screen lively it repeats a 150-minute cycle: a +20-point disturbance from
// minute 60 to 100 and a metric outage from minute 120 to 126, while producers
// vary around 1,100 messages/s over a 250,000-message starting backlog.
package demo

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/dashboard"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// LoopID is the id of the demo's loop.
const LoopID = "demo-orders"

// Tick is the controller's (simulated) tick period.
const Tick = 60 * time.Second

const (
	plantGain     = 0.05 // points of CPU per message/s
	plantBase     = 10.0 // % CPU
	plantTau      = 15 * time.Second
	plantDeadTime = 5 * time.Second
	metricPeriod  = 60 * time.Second
	metricDelay   = 90 * time.Second
	cycle         = 150 * time.Minute
)

var (
	_ dashboard.ParamsReader = (*Demo)(nil)
	_ dashboard.ParamsWriter = (*Demo)(nil)
	_ dashboard.Validator    = (*Demo)(nil)
	_ dashboard.LoopLister   = (*Demo)(nil)
)

// DefaultParams are the demo loop's PARAMS attributes at start: a PI tuned by
// SIMC on the loop's total dead time, with the plant's model as reference
// feedforward.
func DefaultParams() dashboard.Params {
	return dashboard.Params{
		"enabled": true, "mode": "auto", "setpoint": 70.0,
		"kp": 1.0, "ki": 0.065, "kd": 0.0, "anti_windup": "conditional", "setpoint_filter": "2m0s",
		"ff_gain": plantGain, "ff_base": plantBase, "ff_tau": plantTau.String(), "ff_dead_time": plantDeadTime.String(),
		"min_rate": 50.0, "max_rate": 3000.0, "slew_limit": 400.0, "manual_rate": 500.0,
		"tick_period": "1m0s", "rate_ttl": "5m0s",
		"metric_source": "cloudwatch", "metric_namespace": "AWS/RDS", "metric_name": "CPUUtilization",
		"metric_statistic": "Average", "metric_period": "1m0s",
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": LoopID},
		"stale_policy":      "hold", "safe_rate": 200.0, "stale_after": "5m0s",
	}
}

// Demo is the simulated loop, its parameters and its history.
type Demo struct {
	mu       sync.Mutex
	params   dashboard.Params
	set      loop.Params
	updated  time.Time
	hist     *ddbhistory.Memory
	ctrl     control.Controller
	now      time.Time // simulated time
	start    time.Time
	cpu      float64   // true CPU, %
	pending  []float64 // inputs in the plant's dead time, one per second
	bucket   []float64 // CPU samples of the metric period being averaged
	metrics  []sample  // averages not yet published or published
	backlog  float64   // messages in the queue
	rate     float64   // RATE item in force (written by the controller)
	rateAt   time.Time
	consumed float64 // consumed rate over the last tick, messages/s
	staleFor time.Duration
}

type sample struct {
	end time.Time // end of the averaging period
	avg float64
}

// New returns a demo whose simulated clock starts at start.
func New(start time.Time) *Demo {
	d := &Demo{
		params: DefaultParams(), hist: ddbhistory.NewMemory(0),
		now: start, start: start, cpu: plantBase, backlog: 250_000,
		pending: make([]float64, int(plantDeadTime/time.Second)),
	}
	set, err := loop.DecodeParams(LoopID, d.params)
	if err != nil {
		panic(fmt.Sprintf("demo: default parameters invalid: %v", err)) // a programming error
	}
	d.set = set
	d.ctrl.Config = set.ControlConfig()
	// the destination ran at its base load before the demo started
	for k := 5; k >= 0; k-- {
		d.metrics = append(d.metrics, sample{end: start.Add(-time.Duration(k) * metricPeriod), avg: plantBase})
	}
	return d
}

// History returns the demo's history (what the dashboard reads).
func (d *Demo) History() *ddbhistory.Memory { return d.hist }

// Loops lists the demo's one loop.
func (d *Demo) Loops(context.Context) ([]string, error) { return []string{LoopID}, nil }

// Params returns the parameters in force.
func (d *Demo) Params(_ context.Context, id string) (dashboard.ParamsStatus, error) {
	if id != LoopID {
		return dashboard.ParamsStatus{}, fmt.Errorf("loop %q: %w", id, dashboard.ErrNotFound)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := dashboard.Params{}
	for k, v := range d.params {
		p[k] = v
	}
	return dashboard.ParamsStatus{Params: p, UpdatedAt: d.updated}, nil
}

// Validate checks p with the controller's own decoder, loop.DecodeParams.
func (d *Demo) Validate(id string, p dashboard.Params) error {
	_, err := loop.DecodeParams(id, p)
	return err
}

// SetParams replaces the parameters; the next tick applies them.
func (d *Demo) SetParams(_ context.Context, id string, p dashboard.Params) error {
	if id != LoopID {
		return fmt.Errorf("loop %q: %w", id, dashboard.ErrNotFound)
	}
	set, err := loop.DecodeParams(id, p)
	if err != nil {
		return fmt.Errorf("demo parameters: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.params = p
	d.set = set
	d.updated = d.now
	return nil
}

// phase is the time within the demo's repeating cycle.
func (d *Demo) phase() time.Duration { return d.now.Sub(d.start) % cycle }

func (d *Demo) disturbance() float64 {
	if ph := d.phase(); ph >= 60*time.Minute && ph < 100*time.Minute {
		return 20
	}
	return 0
}

func (d *Demo) producers() float64 {
	return 1100 + 400*math.Sin(2*math.Pi*d.now.Sub(d.start).Seconds()/(90*60))
}

// Step advances the simulation by one controller tick and records a history
// point.
func (d *Demo) Step(ctx context.Context) error {
	d.mu.Lock()
	p := d.step()
	d.mu.Unlock()
	return d.hist.Append(ctx, LoopID, p)
}

// step simulates one tick with 1 s resolution, then runs the controller.
func (d *Demo) step() dashboard.Point {
	const dt = time.Second
	allowed := d.set.Stale.SafeRate
	if !d.rateAt.IsZero() && d.now.Sub(d.rateAt) < d.set.RateTTL {
		allowed = d.rate
	}
	var done float64
	for range int(Tick / dt) {
		d.now = d.now.Add(dt)
		arrive := d.producers() * dt.Seconds()
		d.backlog += arrive
		capacity := math.Max(0, (100-plantBase-d.disturbance())/plantGain) // the CPU cannot pass 100 %
		u := math.Min(allowed, math.Min(capacity, d.backlog/dt.Seconds()))
		d.backlog -= u * dt.Seconds()
		done += u * dt.Seconds()
		d.pending = append(d.pending, u)
		ud := d.pending[0]
		d.pending = d.pending[1:]
		target := math.Min(100, plantBase+d.disturbance()+plantGain*ud)
		d.cpu += (target - d.cpu) * dt.Seconds() / plantTau.Seconds()
		d.bucket = append(d.bucket, d.cpu)
		if d.now.Sub(d.start)%metricPeriod == 0 {
			var sum float64
			for _, v := range d.bucket {
				sum += v
			}
			d.metrics = append(d.metrics, sample{end: d.now, avg: sum / float64(len(d.bucket))})
			d.bucket = d.bucket[:0]
			if len(d.metrics) > 10 {
				d.metrics = d.metrics[1:]
			}
		}
	}
	d.consumed = done / Tick.Seconds()

	// the controller tick: newest published datapoint, PID update, RATE
	meas, age := math.NaN(), time.Duration(0)
	outage := d.phase() >= 120*time.Minute && d.phase() < 126*time.Minute
	for i := len(d.metrics) - 1; i >= 0 && !outage; i-- {
		if m := d.metrics[i]; !m.end.Add(metricDelay).After(d.now) {
			meas, age = m.avg, d.now.Sub(m.end)
			break
		}
	}
	if age-metricPeriod > d.set.StaleAfter {
		meas = math.NaN()
	}
	d.ctrl.Config = d.set.ControlConfig()
	out := d.ctrl.Update(control.Input{
		Setpoint: d.set.Setpoint, Measurement: meas, MeasurementAge: age,
		MeasurementPeriod: metricPeriod, SamplingInterval: Tick,
	})
	rate := out.Rate
	if out.Held {
		d.staleFor += Tick
		rate = d.set.StalePolicy().Apply(d.rate, d.staleFor, Tick)
	} else {
		d.staleFor = 0
	}
	if d.set.Mode != loop.ModeShadow {
		d.rate, d.rateAt = rate, d.now
	}
	if out.Held { // the terms were not computed: chart a gap
		out.P, out.I, out.FF = math.NaN(), math.NaN(), math.NaN()
	}
	return dashboard.Point{
		T: d.now, Setpoint: d.set.Setpoint, Measured: meas, Rate: rate, Consumed: d.consumed,
		P: out.P, I: out.I, FF: out.FF, Saturated: out.Saturated, Stale: out.Held,
		Depth: d.backlog, Mode: string(d.set.Mode),
	}
}

// Run steps the simulation once per value received from ticks (one
// simulated tick each) until ctx is done.
func (d *Demo) Run(ctx context.Context, ticks <-chan time.Time) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticks:
			if err := d.Step(ctx); err != nil {
				return err
			}
		}
	}
}
