// Package stepdemo is the dashboard's embedded demo: Sluice's embedded demo
// (internal/demo: the production controller tick over in-memory items and the
// production consumer draining an in-memory queue, on the simulated
// destination of internal/sim) run in stepping mode, one controller tick per
// Step, with a history point recorded per tick.
//
// The simulated world is the lab's reference plant with heavier messages
// (gain 0.5 points of CPU per message/s, ten times the reference, so that
// the real consumer code handles a tenth of the messages and the demo costs
// little CPU; 10 % base load, 15 s lag, 5 s dead time; 60 s metric averages
// published 90 s late; a 60 s tick). To keep a newcomer's screen lively it
// repeats a 150-minute cycle: a +20-point disturbance from minute 60 to 100
// and a metric outage from minute 120 to 127, with producers at 150
// messages/s over a 25,000-message starting backlog,
// for 47.5 simulated hours (47.5 minutes at the dashboard's default 60x).
package stepdemo

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/history"
)

// LoopID is the id of the demo's loop.
const LoopID = demo.LoopID

// Tick is the controller's (simulated) tick period.
const Tick = 60 * time.Second

const (
	cycle    = 150 * time.Minute
	cycles   = 19   // the run's length: 47.5 hours of simulated time (the simulator's bound is 48)
	safeRate = 20.0 // the consumers' configured fallback, messages/s
	noise    = 0.4  // metric noise, points of CPU
)

// scenario is the simulated world: the reference plant, repeating cycles.
func scenario(seed uint64) sim.Scenario {
	s := sim.Reference()
	s.Duration = cycles * cycle
	s.Plant.Gain = 0.5
	s.ProducerRate = 150
	s.MaxRate = 300
	s.Backlog = 25_000
	s.Noise = noise
	s.Seed = seed
	s.SetpointChanges = nil
	s.Disturbances = make([]sim.Disturbance, cycles)
	for i := range s.Disturbances {
		s.Disturbances[i] = sim.Disturbance{At: time.Duration(i)*cycle + 60*time.Minute, Duration: 40 * time.Minute, Size: 20}
	}
	return s
}

func outages() []demo.Outage {
	out := make([]demo.Outage, cycles)
	for i := range out {
		out[i] = demo.Outage{At: time.Duration(i)*cycle + 120*time.Minute, Duration: 7 * time.Minute}
	}
	return out
}

// DefaultParams are the demo loop's PARAMS attributes at start: the thesis's
// PI with anti-windup, setpoint filter and feedforward, tuned from a step
// test on the simulated plant, exactly as `sluice demo` and `sluice lab
// compare` tune it.
func DefaultParams() dashboard.Params {
	p, err := defaultParams(scenario(1))
	if err != nil {
		// The reference plant always identifies; a failure is a bug.
		panic(fmt.Sprintf("demo parameters: %v", err))
	}
	return p
}

func defaultParams(s sim.Scenario) (dashboard.Params, error) {
	cfg, err := demoConfig(s, false)
	if err != nil {
		return nil, err
	}
	return dashboard.Params(cfg.Params.Attrs(metricsources.All())), nil
}

// demoConfig is the demo's loop on s: the parameters tuned from a step
// test, with the consumers' inner loop on when inner (demo.WithInner), as
// `sluice demo` runs it.
func demoConfig(s sim.Scenario, inner bool) (demo.Config, error) {
	c, model, err := demo.Tune(s)
	if err != nil {
		return demo.Config{}, err
	}
	p := demo.DefaultParams(s, c)
	p.ManualRate = 50
	cfg := demo.Config{Scenario: s, Params: p}
	if inner {
		demo.WithInner(&cfg, model)
	}
	return cfg, nil
}

// Demo is the simulated loop, its stores and its history.
type Demo struct {
	sim    stepper
	loops  []string
	params *dashboard.LoopParams
	hist   *ddbhistory.Memory
	err    error // the first history write that failed
}

// New returns a demo whose simulated clock starts at start, with the default
// parameters and the default cycle; seed drives the metric noise.
func New(start time.Time, seed uint64) (*Demo, error) {
	return NewWithTraffic(start, seed, Traffic{})
}

// NewWithTraffic is New with the traffic tr (traffic.go).
func NewWithTraffic(start time.Time, seed uint64, tr Traffic) (*Demo, error) {
	s := scenario(seed)
	if err := tr.apply(&s); err != nil {
		return nil, err
	}
	cfg, err := demoConfig(s, tr.Inner)
	if err != nil {
		return nil, fmt.Errorf("demo parameters: %w", err)
	}
	attrs := dashboard.Params(cfg.Params.Attrs(metricsources.All()))
	d := &Demo{hist: ddbhistory.NewMemory(0), loops: []string{LoopID}}
	cfg.Start, cfg.SafeRate, cfg.Outages, cfg.OnTick, cfg.NoSeries, cfg.BatchSize = start, safeRate, outages(), d.record, true, 10
	d.sim, err = demo.Start(cfg)
	if err != nil {
		return nil, err
	}
	d.params = dashboard.NewLoopParams(d.sim.Store(), d.sim.Now)
	if err := d.params.Validate(LoopID, attrs); err != nil {
		return nil, fmt.Errorf("demo parameters: %w", err)
	}
	return d, nil
}

// record appends one history point per applied tick, with what the
// consumers achieved and the queue's depth.
func (d *Demo) record(t demo.Tick) {
	for _, r := range t.Reports {
		p, ok := t.Point(r)
		if r.Member != nil {
			// A member's point carries its own consumers' rate, not the
			// world's total.
			p, ok = history.FromReport(t.Now, r)
		}
		if !ok {
			continue
		}
		if err := d.hist.Append(context.Background(), r.Loop, p); err != nil && d.err == nil {
			d.err = err
		}
	}
}

// History returns the demo's history (what the dashboard reads).
func (d *Demo) History() *ddbhistory.Memory { return d.hist }

// Params returns the demo's parameter port: PARAMS in the memory store,
// validated by loop.DecodeParams.
func (d *Demo) Params() *dashboard.LoopParams { return d.params }

// Loops lists the demo's loops.
func (d *Demo) Loops(context.Context) ([]string, error) { return d.loops, nil }

// Step advances the simulation by one controller tick period: the consumer
// drains the queue at the allowed rate, the plant responds, the metric
// pipeline publishes, the controller ticks, and a history point is recorded.
func (d *Demo) Step(ctx context.Context) error {
	if err := d.sim.Advance(ctx, Tick); err != nil {
		if serr := d.sim.Err(); serr != nil {
			return fmt.Errorf("demo: %w", serr)
		}
		return err
	}
	if d.err != nil {
		return fmt.Errorf("demo history: %w", d.err)
	}
	return nil
}

// Run steps the demo at every value received from ticks until ctx ends.
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

// Close stops the simulation.
func (d *Demo) Close() { d.sim.Close() }
