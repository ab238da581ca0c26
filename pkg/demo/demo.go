// Package demo is Sluice's embedded default: the whole loop with no service
// at all. The reference scenario's simulated destination (pkg/sim's plant
// and CloudWatch-like metric pipeline) is regulated by the production
// controller tick (pkg/loop's Ticker over pkg/adapter/memstore, the code the
// controller Lambda runs) and drained by the production consumer
// (pkg/consume's Consumer, RateCache and Pacer, the code the SQS Lambda and
// the ECS worker run) from an in-memory queue, in accelerated time.
//
// Time is virtual and driven by the consumer: every time it sleeps (pacing,
// an empty queue), the world advances to the new instant in one-second plant
// steps, producers enqueue, the metric pipeline publishes and the controller
// ticks when due. A run is deterministic for the scenario's seed.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/sim"
	"github.com/sluice-dev/sluice/pkg/sim/lab"
)

// LoopID is the id of the demo's loop.
const LoopID = "demo"

// epoch is the virtual time of the run's start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Config configures a run.
type Config struct {
	// Scenario is the simulated world; sim.Reference() by default.
	Scenario sim.Scenario
	// Params are the loop's PARAMS, as an operator would write them; the
	// setpoint changes of the scenario are applied as PARAMS edits.
	Params loop.Params
	// BatchSize is the consumer's batch size (default 10, as SQS).
	BatchSize int
	// PoisonEvery makes every n-th produced message malformed (0: none), to
	// show the dead-letter path.
	PoisonEvery int64
	// Progress, when set, is called every ProgressEvery of virtual time.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Log receives the consumer's and the controller's logs (nil: discarded).
	Log *slog.Logger
}

// Progress is a snapshot of a run in progress.
type Progress struct {
	At       time.Duration // virtual time since the start
	Duration time.Duration // the run's length
	Setpoint float64
	CPU      float64 // true CPU
	Measured float64 // newest published datapoint (NaN before the first)
	Rate     float64 // allowed rate in the RATE item
	Queued   int64
	Stored   int64
}

// Result is a finished run.
type Result struct {
	Series  sim.Series  `json:"series"`
	Counts  Counts      `json:"counts"`
	Metrics sim.Metrics `json:"metrics"`
	// Ticks counts the controller ticks that committed; RateReads the RATE
	// reads of the consumer.
	Ticks     int   `json:"ticks"`
	RateReads int64 `json:"rate_reads"`
	// Fallbacks counts the consumer's falls back to its safe rate.
	Fallbacks int64 `json:"fallbacks"`
}

// Counts are the message counters of a run, each kept by a different part.
type Counts struct {
	sim.Counts
	// DeadLettered counts poison messages moved to the dead-letter queue.
	DeadLettered int64 `json:"dead_lettered"`
}

// Lost is what no counter accounts for: zero unless a message disappeared.
func (c Counts) Lost() int64 { return c.Counts.Lost() - c.DeadLettered }

// Run runs the demo until the scenario's duration has passed in virtual time.
func Run(ctx context.Context, cfg Config) (Result, error) {
	s := cfg.Scenario
	if err := s.Validate(); err != nil {
		return Result{}, fmt.Errorf("scenario: %w", err)
	}
	if err := cfg.Params.Validate(); err != nil {
		return Result{}, fmt.Errorf("params: %w", err)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 10
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := newWorld(cfg)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.cancel = cancel

	rates := consume.NewRateCache(consume.RateCacheConfig{
		Loop:     LoopID,
		SafeRate: cfg.Params.Stale.SafeRate,
	}, w, nil, w, log, nil)
	c := consume.New(consume.Config{BatchSize: cfg.BatchSize}, rates, w, w, log, nil)
	if err := c.Run(ctx, w); err != nil {
		return Result{}, fmt.Errorf("consumer: %w", err)
	}
	if w.err != nil {
		return Result{}, w.err
	}
	st := c.Stats()
	res := Result{
		Series:    w.series,
		Ticks:     w.ticks,
		RateReads: w.rateReads,
		Fallbacks: st.RateFallbacks.Load(),
		Counts: Counts{
			Counts: sim.Counts{
				Produced:  w.produced,
				Processed: w.processed,
				InFlight:  int64(len(w.inflight)),
				Queued:    w.queued(),
			},
			DeadLettered: w.dead,
		},
	}
	res.Metrics = sim.Measure(s, w.series, res.Counts.Counts)
	res.Metrics.Lost = res.Counts.Lost()
	return res, nil
}

// world is the simulated environment around the production code: the
// clock, the queue (a consume.Source), the destination (a consume.Sink) and
// the metric source (a loop.MetricReader). Only the consumer's goroutine
// touches it.
type world struct {
	cfg    Config
	s      sim.Scenario
	store  *memstore.Store
	ticker *loop.Ticker
	cancel context.CancelFunc
	err    error

	now   time.Duration // virtual time since the start
	t     time.Duration // time the plant has been integrated to
	plant *sim.Plant
	pipe  *sim.Pipeline

	nextTick     time.Duration
	nextProgress time.Duration
	setpoint     float64
	changes      []sim.SetpointChange

	// The queue: messages 1..produced; ids below head were received at
	// least once; redelivered holds released messages to receive again.
	produced    int64
	carry       float64
	head        int64
	redelivered []int64
	inflight    map[int64]struct{}
	dead        int64
	received    int64

	// The destination.
	processed int64
	pending   int64 // stored during the current plant step

	ticks     int
	rateReads int64
	series    sim.Series
}

var (
	_ consume.Source       = (*world)(nil)
	_ consume.DeadLetterer = (*world)(nil)
	_ consume.Sink         = (*world)(nil)
	_ consume.Clock        = (*world)(nil)
	_ loop.MetricReader    = (*world)(nil)
	_ consume.RateReader   = (*world)(nil)
)

func newWorld(cfg Config) (*world, error) {
	s := cfg.Scenario
	step := s.Step
	if step == 0 {
		step = time.Second
	}
	w := &world{
		cfg:      cfg,
		s:        s,
		store:    memstore.New(),
		plant:    sim.NewPlant(s.Plant, step, 0),
		pipe:     sim.NewPipeline(s.MetricPeriod, s.MetricDelay, s.Noise, rand.New(rand.NewPCG(s.Seed, 0x5eed)), s.Plant.Base),
		inflight: make(map[int64]struct{}),
		produced: s.Backlog,
		setpoint: cfg.Params.Setpoint,
		changes:  append([]sim.SetpointChange(nil), s.SetpointChanges...),
	}
	w.ticker = &loop.Ticker{
		Store:   w.store,
		Metrics: map[loop.Source]loop.MetricReader{cfg.Params.Metric.Source: w},
		Now:     w.Now,
	}
	if err := w.store.WriteParams(context.Background(), LoopID, cfg.Params.Attrs()); err != nil {
		return nil, fmt.Errorf("write PARAMS: %w", err)
	}
	return w, nil
}

// Now returns the virtual time.
func (w *world) Now() time.Time { return epoch.Add(w.now) }

// Sleep advances the world by d (consume.Clock).
func (w *world) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.advance(ctx, w.now+max(d, 0))
	return ctx.Err()
}

// advance moves the world to virtual time to, one plant step at a time.
func (w *world) advance(ctx context.Context, to time.Duration) {
	dt := w.s.Step
	if dt == 0 {
		dt = time.Second
	}
	for w.t+dt <= to && ctx.Err() == nil {
		w.now = w.t
		w.tickIfDue(ctx)
		w.stepOnce(dt)
		if w.t >= w.s.Duration {
			w.now = w.t
			w.cancel()
			return
		}
	}
	if to > w.now {
		w.now = to
	}
}

// tickIfDue runs the controller tick and the operator's setpoint edits due
// at the current instant, and reports progress.
func (w *world) tickIfDue(ctx context.Context) {
	for len(w.changes) > 0 && w.changes[0].At <= w.t {
		w.setpoint = w.changes[0].Value
		w.changes = w.changes[1:]
		if err := w.editSetpoint(ctx, w.setpoint); err != nil {
			w.fail(err)
			return
		}
	}
	if w.t >= w.nextTick {
		reports, err := w.ticker.Tick(ctx)
		if err != nil {
			w.fail(fmt.Errorf("controller tick at %v: %w", w.t, err))
			return
		}
		for _, r := range reports {
			if r.Outcome == loop.OutcomeApplied {
				w.ticks++
			}
			if r.Err != nil {
				w.fail(fmt.Errorf("controller tick at %v: %w", w.t, r.Err))
				return
			}
		}
		w.nextTick += w.s.Tick
	}
	if w.cfg.Progress != nil && w.t >= w.nextProgress {
		w.cfg.Progress(w.progress())
		every := w.cfg.ProgressEvery
		if every <= 0 {
			every = 5 * time.Minute
		}
		w.nextProgress += every
	}
}

// editSetpoint changes the setpoint in PARAMS, as an operator does.
func (w *world) editSetpoint(ctx context.Context, sp float64) error {
	attrs, err := w.store.ReadParams(ctx, LoopID)
	if err != nil {
		return fmt.Errorf("read PARAMS: %w", err)
	}
	attrs[loop.AttrSetpoint] = sp
	if err := w.store.WriteParams(ctx, LoopID, attrs); err != nil {
		return fmt.Errorf("edit setpoint: %w", err)
	}
	return nil
}

// stepOnce integrates the plant over [t, t+dt) with what the destination
// took during that step, produces, and feeds the metric pipeline.
func (w *world) stepOnce(dt time.Duration) {
	secs := dt.Seconds()
	u := float64(w.pending) / secs
	w.pending = 0
	d := w.s.DisturbanceAt(w.t)
	y := w.plant.Step(u, d)
	w.pipe.Observe(w.t, dt, y)

	w.carry += w.s.ProducerRate * secs
	n := int64(w.carry)
	w.carry -= float64(n)
	w.produced += n

	w.t += dt
	w.pipe.Publish(w.t)

	measured := math.NaN()
	if dp, ok := w.pipe.Latest(); ok {
		measured = dp.Value
	}
	allowed := math.NaN()
	if r, err := w.store.ReadRate(context.Background(), LoopID); err == nil {
		allowed = r.PerSecond
	}
	w.series.T = append(w.series.T, w.t.Seconds())
	w.series.Setpoint = append(w.series.Setpoint, w.s.SetpointAt(w.t-dt))
	w.series.CPU = append(w.series.CPU, y)
	w.series.Measured = append(w.series.Measured, measured)
	w.series.Allowed = append(w.series.Allowed, allowed)
	w.series.Processed = append(w.series.Processed, u)
}

func (w *world) progress() Progress {
	p := Progress{At: w.t, Duration: w.s.Duration, Setpoint: w.setpoint, Measured: math.NaN(), Rate: math.NaN(),
		Queued: w.queued(), Stored: w.processed, CPU: w.s.Plant.Base}
	if n := len(w.series.CPU); n > 0 {
		p.CPU = w.series.CPU[n-1]
		p.Measured = w.series.Measured[n-1]
		p.Rate = w.series.Allowed[n-1]
	}
	return p
}

func (w *world) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.cancel()
}

func (w *world) queued() int64 { return w.produced - w.head + int64(len(w.redelivered)) }

// ReadMetrics returns the newest published datapoint for every query, as
// CloudWatch's GetMetricData would (loop.MetricReader).
func (w *world) ReadMetrics(_ context.Context, queries []loop.MetricQuery, _ time.Time) ([]loop.Sample, error) {
	out := make([]loop.Sample, len(queries))
	if dp, ok := w.pipe.Latest(); ok {
		for i := range out {
			out[i] = loop.Sample{Value: dp.Value, Time: epoch.Add(dp.Start), Found: true}
		}
	}
	return out, nil
}

// ReadRate reads the RATE item the controller wrote, counting the reads
// (consume.RateReader).
func (w *world) ReadRate(ctx context.Context, loopID string) (loop.Rate, error) {
	w.rateReads++
	return w.store.ReadRate(ctx, loopID)
}

// Receive hands out up to max messages, oldest first; on an empty queue it
// waits 100 ms of virtual time, as a long poll would (consume.Source).
func (w *world) Receive(ctx context.Context, max int) ([]consume.Message, error) {
	if w.queued() == 0 {
		return nil, w.Sleep(ctx, 100*time.Millisecond)
	}
	msgs := make([]consume.Message, 0, max)
	for len(msgs) < max {
		var id int64
		switch {
		case len(w.redelivered) > 0:
			id = w.redelivered[0]
			w.redelivered = w.redelivered[1:]
		case w.head < w.produced:
			w.head++
			id = w.head
		default:
			return msgs, nil
		}
		w.inflight[id] = struct{}{}
		w.received++
		msgs = append(msgs, consume.Message{ID: fmt.Sprintf("m-%d", id), Body: w.body(id), Handle: id})
	}
	return msgs, nil
}

// body is message id's payload: a small JSON order, or a malformed one for
// every PoisonEvery-th message.
func (w *world) body(id int64) []byte {
	if n := w.cfg.PoisonEvery; n > 0 && id%n == 0 {
		return []byte(`{"order": 42, "amount": `)
	}
	return fmt.Appendf(nil, `{"order":%d,"amount":%d}`, id, id%997)
}

func (w *world) settle(msgs []consume.Message) error {
	for _, m := range msgs {
		id, ok := m.Handle.(int64)
		if !ok {
			return fmt.Errorf("message %s: foreign handle %T", m.ID, m.Handle)
		}
		if _, ok := w.inflight[id]; !ok {
			return fmt.Errorf("message %s: not in flight", m.ID)
		}
		delete(w.inflight, id)
	}
	return nil
}

// Ack deletes stored messages (consume.Source).
func (w *world) Ack(_ context.Context, msgs []consume.Message) error { return w.settle(msgs) }

// Release puts messages back for redelivery (consume.Source).
func (w *world) Release(_ context.Context, msgs []consume.Message) error {
	if err := w.settle(msgs); err != nil {
		return err
	}
	for _, m := range msgs {
		w.redelivered = append(w.redelivered, m.Handle.(int64))
	}
	return nil
}

// DeadLetter moves poison messages to the dead-letter queue
// (consume.DeadLetterer).
func (w *world) DeadLetter(_ context.Context, poison []consume.Poison) error {
	msgs := make([]consume.Message, len(poison))
	for i, p := range poison {
		if p.Reason == "" {
			return errors.New("dead letter without a reason")
		}
		msgs[i] = p.Message
	}
	if err := w.settle(msgs); err != nil {
		return err
	}
	w.dead += int64(len(poison))
	return nil
}

// Store is the simulated destination: every message it takes adds to the
// plant's load during the current step (consume.Sink).
func (w *world) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	w.processed += int64(len(msgs))
	w.pending += int64(len(msgs))
	return make([]consume.Result, len(msgs)), nil
}

// DefaultParams returns PARAMS for scenario s with controller configuration
// c: the loop reads a CloudWatch metric of the scenario's period, ticks at
// the scenario's tick, and holds the rate when the metric goes stale.
func DefaultParams(s sim.Scenario, c control.Config) loop.Params {
	return loop.Params{
		Loop:             LoopID,
		Enabled:          true,
		Mode:             loop.ModeAuto,
		Setpoint:         s.Setpoint,
		Kp:               c.Kp,
		Ki:               c.Ki,
		Kd:               c.Kd,
		DerivativeFilter: c.DerivativeFilter,
		AntiWindup:       c.AntiWindup,
		TrackingTime:     c.TrackingTime,
		SetpointFilter:   c.SetpointFilter,
		DelayAware:       c.DelayAware,
		NoiseBand:        c.NoiseBand,
		Feedforward:      c.Feedforward,
		MinRate:          c.Min,
		MaxRate:          c.Max,
		SlewLimit:        c.Slew,
		TickPeriod:       s.Tick,
		RateTTL:          3 * s.Tick,
		Metric: loop.MetricQuery{
			Source:     loop.SourceCloudWatch,
			Namespace:  loop.DefaultNamespace,
			Metric:     "CPUUtilization",
			Dimensions: map[string]string{"DBInstanceIdentifier": LoopID},
			Statistic:  "Average",
			Period:     s.MetricPeriod,
		},
		Stale:      control.StalePolicy{Action: control.StaleHold, SafeRate: c.Min + (c.Max-c.Min)/10},
		StaleAfter: s.MetricPeriod + s.MetricDelay + 3*s.Tick,
	}
}

// Tune identifies the scenario's plant by an open-loop step test and tunes
// the thesis's controller (PI with conditional anti-windup, setpoint filter
// and reference feedforward, with the delay-aware integrator) from the
// identified model, exactly as `sluice lab compare` tunes pi-aw-spf-ff.
func Tune(s sim.Scenario) (control.Config, lab.Model, error) {
	m, model, err := lab.Identify(s, nil)
	if err != nil {
		return control.Config{}, lab.Model{}, fmt.Errorf("identify: %w", err)
	}
	cfg, _, err := lab.ControllerConfig(lab.PIAWSPFF, s, lab.Plant{Model: m, NoiseSD: model.NoiseSD}, lab.Gains{})
	if err != nil {
		return control.Config{}, lab.Model{}, err
	}
	return cfg, model, nil
}
