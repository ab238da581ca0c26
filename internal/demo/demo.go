// Package demo is Sluice's embedded default: the whole loop with no service
// at all. The reference scenario's simulated destination (internal/sim's plant
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
	"sync"
	"time"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
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
	// Start is the virtual wall-clock time of the run's start (default
	// 2026-01-01 UTC).
	Start time.Time
	// SafeRate is the consumers' configured fallback when RATE is missing or
	// expired, messages/s (default: the loop's stale-policy safe rate).
	SafeRate float64
	// Outages are periods during which the metric source returns nothing
	// (the controller's stale policy acts).
	Outages []Outage
	// OnTick, when set, is called after each controller tick.
	OnTick func(Tick)
	// NoSeries skips the per-second time series (and so the measures of
	// the Result): for long runs in stepping mode that record history
	// through OnTick instead.
	NoSeries bool
	// NoReport switches the consumers' report off: no lease, so the
	// controller does not know what they took and RATE is not shared by
	// live peers (the product before the consumers reported what they
	// stored).
	NoReport bool
	// Inner, when set, runs the consumer's inner loop on the destination's
	// latency (the scenario's, latency.go): stores then take virtual time.
	Inner *consume.InnerConfig
}

// Outage is a period without metric datapoints.
type Outage struct {
	At, Duration time.Duration
}

// Tick is what the world looked like at a controller tick.
type Tick struct {
	// Now is the tick's virtual time.
	Now time.Time
	// Reports are the controller's reports for the tick.
	Reports []loop.Report
	// Consumed is the rate the destination took since the previous tick,
	// messages/s; Depth is the queue's depth (ready + in flight).
	Consumed float64
	Depth    int64
}

// Point is the history point of report r of the tick (history.FromReport),
// with what the consumers achieved and the queue's depth; ok is false for a
// report that applied no tick. The consumed rate is the raw one (no
// ConsumedSmoothing).
func (t Tick) Point(r loop.Report) (p history.Point, ok bool) {
	p, ok = history.FromReport(t.Now, r)
	p.Consumed, p.ConsumedSmoothing, p.Depth = t.Consumed, 0, float64(t.Depth)
	return p, ok
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

// Run runs the demo until the scenario's duration has passed in virtual time,
// as fast as the machine goes.
func Run(ctx context.Context, cfg Config) (Result, error) {
	sm, err := newSim(cfg)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sm.w.cancel = cancel
	if err := sm.c.Run(ctx, sm.w); err != nil {
		return Result{}, fmt.Errorf("consumer: %w", err)
	}
	if sm.w.err != nil {
		return Result{}, sm.w.err
	}
	return sm.result(), nil
}

// Sim is a demo run in stepping mode: virtual time moves only when Advance
// lets it, so that a dashboard can show it at a human pace.
type Sim struct {
	w      *world
	c      *consume.Consumer
	cancel context.CancelFunc
	done   chan struct{}
}

// Start starts a run in stepping mode: the consumer runs in its own
// goroutine and blocks at virtual time zero until Advance. Close stops it.
func Start(cfg Config) (*Sim, error) {
	sm, err := newSim(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sm.w.cancel, sm.cancel = cancel, cancel
	sm.w.gate = newGate()
	sm.done = make(chan struct{})
	go func() {
		defer close(sm.done)
		_ = sm.c.Run(ctx, sm.w) // Run returns nil; failures are in w.err
	}()
	return sm, nil
}

// Advance lets virtual time move d further and waits until the world got
// there (one controller tick per tick period).
func (sm *Sim) Advance(ctx context.Context, d time.Duration) error {
	target := sm.w.gate.raise(d)
	if err := sm.w.gate.wait(ctx, target, sm.done); err != nil {
		return err
	}
	return nil
}

// Err returns why the run stopped, nil while it runs.
func (sm *Sim) Err() error {
	select {
	case <-sm.done:
		if sm.w.err != nil {
			return sm.w.err
		}
		return errors.New("demo stopped")
	default:
		return nil
	}
}

// Now returns the virtual time the world last reached. Safe for concurrent
// use.
func (sm *Sim) Now() time.Time { return sm.w.start.Add(sm.w.gate.at()) }

// Store returns the loop's item store (PARAMS, STATE, RATE): operators'
// edits go there. It is safe for concurrent use.
func (sm *Sim) Store() *memstore.Store { return sm.w.store }

// Close stops the run and waits for its goroutine.
func (sm *Sim) Close() {
	sm.cancel()
	<-sm.done
}

// newSim validates cfg and builds the world and the production consumer.
func newSim(cfg Config) (*Sim, error) {
	if err := cfg.Scenario.Validate(); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if err := cfg.Params.Validate(metricsources.All()); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	cfg.BatchSize = defaults.Positive(cfg.BatchSize, 10)
	cfg.SafeRate = defaults.Positive(cfg.SafeRate, cfg.Params.Stale.SafeRate)
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := newWorld(cfg)
	if err != nil {
		return nil, err
	}
	stats := &consume.Stats{}
	var peers consume.Peers
	if !cfg.NoReport {
		peers = consume.NewLease(consume.LeaseConfig{Loop: LoopID, Instance: "demo-consumer"}, w.store, stats, w, log)
	}
	rates := consume.NewRateCache(consume.RateCacheConfig{Loop: LoopID, SafeRate: cfg.SafeRate}, w, peers, w, log, stats)
	c := consume.New(consume.Config{BatchSize: cfg.BatchSize, Inner: cfg.Inner}, rates, w, w, log, stats)
	w.pace = c.Pacer().Rate
	return &Sim{w: w, c: c}, nil
}

func (sm *Sim) result() Result {
	w, st := sm.w, sm.c.Stats()
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
	res.Metrics = sim.Measure(w.s, w.series, res.Counts.Counts)
	res.Metrics.Lost = res.Counts.Lost()
	return res
}

// gate is the stepping mode's bound on virtual time.
type gate struct {
	mu      sync.Mutex
	lim     time.Duration
	raised  chan struct{} // closed when lim grows
	reachAt time.Duration
	reachCh chan struct{} // closed when reachAt grows
}

func newGate() *gate { return &gate{raised: make(chan struct{}), reachCh: make(chan struct{})} }

// limit returns the bound and a channel closed when it is raised.
func (g *gate) limit() (time.Duration, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lim, g.raised
}

// raise moves the bound d further and returns it.
func (g *gate) raise(d time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lim += d
	close(g.raised)
	g.raised = make(chan struct{})
	return g.lim
}

// reached records that the world got to t.
func (g *gate) reached(t time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reachAt = t
	close(g.reachCh)
	g.reachCh = make(chan struct{})
}

func (g *gate) at() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reachAt
}

// wait blocks until the world reached target, the run stopped or ctx ended.
func (g *gate) wait(ctx context.Context, target time.Duration, done <-chan struct{}) error {
	for {
		g.mu.Lock()
		at, ch := g.reachAt, g.reachCh
		g.mu.Unlock()
		if at >= target {
			return nil
		}
		select {
		case <-ch:
		case <-done:
			return errors.New("demo stopped")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// world is the simulated environment around the production code: the
// clock, the queue (a consume.Source), the destination (a consume.Sink) and
// the metric source (a metric.Reader). Only the consumer's goroutine
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

	start         time.Time
	lastTickAt    time.Duration
	lastTickCount int64

	// gate bounds the virtual time in stepping mode (Sim.Advance): the
	// consumer's sleeps block at limit until the stepper raises it.
	gate *gate

	// The destination's latency (nil without one), its newest CPU and the
	// consumer's pace, for the series (latency.go).
	lat  *sim.LatencyMeter
	cpu  float64
	pace func() float64
}

var (
	_ consume.Source       = (*world)(nil)
	_ consume.DeadLetterer = (*world)(nil)
	_ consume.Sink         = (*world)(nil)
	_ consume.Clock        = (*world)(nil)
	_ metric.Reader        = (*world)(nil)
	_ consume.RateReader   = (*world)(nil)
)

func newWorld(cfg Config) (*world, error) {
	s := cfg.Scenario
	step := s.Step
	if step == 0 {
		step = time.Second
	}
	start := cfg.Start
	if start.IsZero() {
		start = epoch
	}
	w := &world{
		start:    start,
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
		Sources: metricsources.All(),
		Store:   w.store,
		Metrics: map[string]metric.Reader{cfg.Params.Metric.Source: w},
		Now:     w.Now,
	}
	if err := w.store.WriteParams(context.Background(), LoopID, cfg.Params.Attrs(metricsources.All())); err != nil {
		return nil, fmt.Errorf("write PARAMS: %w", err)
	}
	w.withLatency()
	return w, nil
}

// Now returns the virtual time.
func (w *world) Now() time.Time { return w.start.Add(w.now) }

// Sleep advances the world by d (consume.Clock). In stepping mode it blocks
// at the gate's limit until the stepper raises it.
func (w *world) Sleep(ctx context.Context, d time.Duration) error {
	target := w.now + max(d, 0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		limit, raised := target, (<-chan struct{})(nil)
		if w.gate != nil {
			limit, raised = w.gate.limit()
			limit = min(limit, target)
		}
		w.advance(ctx, limit)
		if w.now >= target || ctx.Err() != nil {
			return ctx.Err()
		}
		w.gate.reached(w.now)
		select {
		case <-raised:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
		w.nextTick += w.s.Tick
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
		if w.cfg.OnTick != nil {
			consumed := math.NaN()
			if w.t > w.lastTickAt {
				consumed = float64(w.processed-w.lastTickCount) / (w.t - w.lastTickAt).Seconds()
			}
			w.cfg.OnTick(Tick{Now: w.Now(), Reports: reports, Consumed: consumed, Depth: w.queued() + int64(len(w.inflight))})
		}
		w.lastTickAt, w.lastTickCount = w.t, w.processed
	}
	if w.cfg.Progress != nil && w.t >= w.nextProgress {
		w.cfg.Progress(w.progress())
		every := defaults.Positive(w.cfg.ProgressEvery, 5*time.Minute)
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
	if len(w.s.PlantChanges) > 0 {
		w.plant.SetModel(w.s.PlantAt(w.t)) // the controller is not told
	}
	y := w.plant.Step(u, d)
	w.pipe.Observe(w.t, dt, y)
	w.cpu = y

	w.carry += w.s.ProducerRateAt(w.t) * secs
	n := int64(w.carry)
	w.carry -= float64(n)
	w.produced += n + w.s.BurstsIn(w.t, w.t+dt)

	w.t += dt
	w.pipe.Publish(w.t)

	measured := math.NaN()
	if dp, ok := w.pipe.Latest(); ok {
		measured = dp.Value
	}
	if w.cfg.NoSeries {
		return
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
	w.recordLatency(d)
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
// CloudWatch's GetMetricData would (metric.Reader).
func (w *world) ReadMetrics(_ context.Context, queries []metric.Query, _ time.Time) ([]metric.Sample, error) {
	out := make([]metric.Sample, len(queries))
	for _, o := range w.cfg.Outages {
		if w.t >= o.At && w.t < o.At+o.Duration {
			return out, nil
		}
	}
	if dp, ok := w.pipe.Latest(); ok {
		for i := range out {
			out[i] = metric.Sample{Value: dp.Value, Time: w.start.Add(dp.Start), Found: true}
		}
	}
	return out, nil
}

// ReadRate reads the RATE item the controller wrote, counting the reads
// (consume.RateReader).
func (w *world) ReadRate(ctx context.Context, loopID string) (protocol.Rate, error) {
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
func (w *world) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	w.processed += int64(len(msgs))
	w.pending += int64(len(msgs))
	w.storeTime(ctx, len(msgs))
	return make([]consume.Result, len(msgs)), nil
}

// DefaultParams returns PARAMS for scenario s with controller configuration
// c: the loop reads a CloudWatch metric of the scenario's period, ticks at
// the scenario's tick, and holds the rate when the metric goes stale.
func DefaultParams(s sim.Scenario, c control.Config) loop.Params {
	return loop.Params{
		Loop:    LoopID,
		Enabled: true,
		Mode:    loop.ModeAuto,
		Controls: loop.Controls{
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
		},
		Feedforward:    c.Feedforward,
		DemandHeadroom: c.Headroom,
		Ceiling:        c.Ceiling,
		MinRate:        c.Min,
		MaxRate:        c.Max,
		SlewLimit:      c.Slew,
		TickPeriod:     s.Tick,
		RateTTL:        3 * s.Tick,
		Sensing: loop.Sensing{
			Metric: metric.Query{
				Source:     cwmetric.Name,
				Namespace:  cwmetric.DefaultNamespace,
				Metric:     "CPUUtilization",
				Dimensions: map[string]string{"DBInstanceIdentifier": LoopID},
				Statistic:  "Average",
				Period:     s.MetricPeriod,
			},
			Stale:      control.StalePolicy{Action: control.StaleHold, SafeRate: c.Min + (c.Max-c.Min)/10},
			StaleAfter: s.MetricPeriod + s.MetricDelay + 3*s.Tick,
		},
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
	cfg, _, err := lab.ControllerConfig(lab.PIAWSPFF, s, lab.IdentifiedPlant(m, model), lab.Gains{})
	if err != nil {
		return control.Config{}, lab.Model{}, err
	}
	return cfg, model, nil
}
