// Package demo is the dashboard's embedded demo: one loop run by the real
// controller tick (pkg/loop's Ticker over pkg/adapter/memstore, with the
// PARAMS validation, stale policy, bumpless resume and shadow mode of
// production) against a simulated destination (pkg/sim's plant and
// CloudWatch-like metric pipeline), in accelerated time. It needs no service.
//
// The simulated world is DESIGN.md's reference scenario: a plant of gain 0.05
// points of CPU per message/s over a 10 % base load, a 15 s lag and 5 s dead
// time; 60 s metric averages published 90 s after their period ends; a 60 s
// controller tick. To keep a newcomer's screen lively it repeats a
// 150-minute cycle: a +20-point disturbance from minute 60 to 100 and a
// metric outage from minute 120 to 127, while producers vary around 1,100
// messages/s over a 250,000-message starting backlog. Consumers read the
// RATE item through pkg/consume's RateCache (the code the SQS Lambda and the
// ECS worker run, at most once per simulated second) and fall back to their
// safe rate when it is missing or expired; the queue itself is counted, not
// materialised message by message.
package demo

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/dashboard"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/sim"
)

// LoopID is the id of the demo's loop.
const LoopID = "demo-orders"

// Tick is the controller's (simulated) tick period.
const Tick = 60 * time.Second

const (
	step         = time.Second // simulation step
	metricPeriod = 60 * time.Second
	metricDelay  = 90 * time.Second
	metricNoise  = 0.4 // points of CPU, standard deviation
	cycle        = 150 * time.Minute
	safeRate     = 200.0 // the consumers' configured fallback, messages/s
)

// plant is the simulated destination (the scenario's FOPDT).
var plant = control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}

// DefaultParams are the demo loop's PARAMS attributes at start: a PI tuned by
// SIMC on the loop's total dead time, with the plant's model as reference
// feedforward.
func DefaultParams() dashboard.Params {
	return dashboard.Params{
		"enabled": true, "mode": "auto", "setpoint": 70.0,
		"kp": 1.0, "ki": 0.065, "kd": 0.0, "anti_windup": "conditional", "setpoint_filter": "2m0s",
		"ff_gain": plant.Gain, "ff_base": plant.Base, "ff_tau": plant.Tau.String(), "ff_dead_time": plant.DeadTime.String(),
		"min_rate": 50.0, "max_rate": 3000.0, "slew_limit": 400.0, "manual_rate": 500.0,
		"tick_period": "1m0s", "rate_ttl": "3m0s",
		"metric_source": "cloudwatch", "metric_namespace": "AWS/RDS", "metric_name": "CPUUtilization",
		"metric_statistic": "Average", "metric_period": "1m0s",
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": LoopID},
		"stale_policy":      "hold", "safe_rate": safeRate, "stale_after": "5m0s",
	}
}

var (
	_ dashboard.LoopLister = (*Demo)(nil)
	_ loop.MetricReader    = (*metrics)(nil)
	_ consume.Clock        = simClock{}
)

// Demo is the simulated loop, its stores and its history.
type Demo struct {
	store  *memstore.Store
	params *dashboard.LoopParams
	hist   *ddbhistory.Memory

	mu      sync.Mutex // guards the simulation below
	ticker  loop.Ticker
	rates   *consume.RateCache
	plant   *sim.Plant
	pipe    *sim.Pipeline
	start   time.Time
	elapsed time.Duration // simulated time since start
	backlog float64       // messages in the queue
}

// metrics is the loop's metric reader: the simulated pipeline's newest
// published datapoint, or nothing during the cycle's outage.
type metrics struct{ d *Demo }

// ReadMetrics answers every query with the pipeline's newest datapoint.
func (m *metrics) ReadMetrics(_ context.Context, qs []loop.MetricQuery, _ time.Time) ([]loop.Sample, error) {
	out := make([]loop.Sample, len(qs))
	if ph := m.d.elapsed % cycle; ph >= 120*time.Minute && ph < 127*time.Minute {
		return out, nil // the metric is missing
	}
	dp, ok := m.d.pipe.Latest()
	for i := range out {
		out[i] = loop.Sample{Value: dp.Value, Time: m.d.start.Add(dp.Start), Found: ok}
	}
	return out, nil
}

// New returns a demo whose simulated clock starts at start, with the default
// parameters; seed drives the metric noise.
func New(start time.Time, seed uint64) (*Demo, error) {
	d := &Demo{
		store: memstore.New(), hist: ddbhistory.NewMemory(0),
		plant: sim.NewPlant(plant, step, 0),
		pipe:  sim.NewPipeline(metricPeriod, metricDelay, metricNoise, rand.New(rand.NewPCG(seed, seed^0x5eed)), plant.Base),
		start: start, backlog: 250_000,
	}
	d.params = dashboard.NewLoopParams(d.store, d.now)
	d.ticker = loop.Ticker{Store: d.store, Metrics: map[loop.Source]loop.MetricReader{loop.SourceCloudWatch: &metrics{d}}, Now: d.now}
	d.rates = consume.NewRateCache(consume.RateCacheConfig{Loop: LoopID, Period: step, SafeRate: safeRate},
		d.store, consume.FixedPeers(1), simClock{d}, slog.New(slog.DiscardHandler), nil)
	if err := d.params.Validate(LoopID, DefaultParams()); err != nil {
		return nil, fmt.Errorf("demo parameters: %w", err)
	}
	if err := d.params.SetParams(context.Background(), LoopID, DefaultParams()); err != nil {
		return nil, err
	}
	return d, nil
}

// now is the simulated clock.
func (d *Demo) now() time.Time { return d.start.Add(d.elapsed) }

// simClock is the consumers' clock: the simulated time. The simulation
// advances it; Sleep only honours ctx (the demo's consumers never wait: the
// queue is counted per simulated second).
type simClock struct{ d *Demo }

func (c simClock) Now() time.Time { return c.d.now() }

func (c simClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// History returns the demo's history (what the dashboard reads).
func (d *Demo) History() *ddbhistory.Memory { return d.hist }

// Params returns the demo's parameter port: PARAMS in the memory store,
// validated by loop.DecodeParams.
func (d *Demo) Params() *dashboard.LoopParams { return d.params }

// Loops lists the demo's one loop.
func (d *Demo) Loops(context.Context) ([]string, error) { return []string{LoopID}, nil }

func (d *Demo) disturbance() float64 {
	if ph := d.elapsed % cycle; ph >= 60*time.Minute && ph < 100*time.Minute {
		return 20
	}
	return 0
}

func (d *Demo) producers() float64 {
	return 1100 + 400*math.Sin(2*math.Pi*d.elapsed.Seconds()/(90*60))
}

// Step simulates one controller tick period second by second, runs the
// controller tick and records a history point.
func (d *Demo) Step(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var done float64
	for range int(Tick / step) {
		allowed := d.rates.Allowed(ctx).Total
		dt := step.Seconds()
		d.backlog += d.producers() * dt
		// at 100 % CPU the destination cannot process more
		capacity := math.Max(0, (100-plant.Base-d.disturbance())/plant.Gain)
		u := math.Min(allowed, math.Min(capacity, d.backlog/dt))
		d.backlog -= u * dt
		done += u * dt
		cpu := d.plant.Step(u, d.disturbance())
		d.pipe.Observe(d.elapsed, step, cpu)
		d.elapsed += step
		d.pipe.Publish(d.elapsed)
	}
	reports, err := d.ticker.Tick(ctx)
	if err != nil {
		return fmt.Errorf("demo tick: %w", err)
	}
	for _, r := range reports {
		if r.Outcome == loop.OutcomeError {
			return fmt.Errorf("demo tick of %s: %w", r.Loop, r.Err)
		}
		p, ok := dashboard.PointFromReport(d.now(), r)
		if !ok {
			continue
		}
		p.Consumed, p.Depth = done/Tick.Seconds(), d.backlog
		if err := d.hist.Append(ctx, r.Loop, p); err != nil {
			return err
		}
	}
	return nil
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
