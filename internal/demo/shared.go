package demo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/fairshare"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Several queues into one database: the destination's loop (its signals
// and controllers) and one member loop per queue, each with its own RATE
// and consumers, run by the production tick over memstore. The consumers
// here are simulated (each takes what its RATE allows from its queue every
// second and refreshes its lease every two seconds), so that three of them
// share one virtual clock.

// SharedMember is one queue feeding the shared database.
type SharedMember struct {
	// Name is the member's loop id.
	Name string `json:"name"`
	// Weight and Priority are the member's PARAMS.
	Weight   float64 `json:"weight"`
	Priority int     `json:"priority"`
	// Rate is its producers' rate, messages/s, changed by ProducerChanges;
	// Backlog is queued at the start; Bursts are enqueued at once.
	Rate            float64              `json:"rate"`
	Backlog         int64                `json:"backlog"`
	ProducerChanges []sim.ProducerChange `json:"producer_changes,omitempty"`
	Bursts          []sim.Burst          `json:"bursts,omitempty"`
}

// SharedLayout is how the queues are controlled.
type SharedLayout string

// Layouts of a shared run.
const (
	// LayoutShared: one destination, a member per queue (fair shares).
	LayoutShared SharedLayout = "shared"
	// LayoutNaive: one full loop per queue, every one on the same CPU.
	LayoutNaive SharedLayout = "naive"
	// LayoutSingle: one loop and one queue carrying the whole traffic.
	LayoutSingle SharedLayout = "single"
)

// SharedConfig configures a run of several queues into one database.
type SharedConfig struct {
	// Scenario is the plant, metric, tick, setpoint (and its changes, edits
	// of the destination's PARAMS), disturbances and duration; its own
	// traffic is ignored (the members carry it).
	Scenario sim.Scenario
	// Params are the destination's PARAMS (every loop's in LayoutNaive).
	Params  loop.Params
	Members []SharedMember
	// WeightChanges edit a member's weight during the run.
	WeightChanges []WeightChange
	Layout        SharedLayout
	// NoDepth, when set, names no member's queue in its PARAMS: by
	// default each member's depth_queue is its name, and the split reads
	// the queues' depth at the tick (ReadMetrics).
	NoDepth bool
	// Start is the virtual wall-clock time of the run's start (default
	// 2026-01-01 UTC).
	Start time.Time
	// OnTick, when set, is called after each controller tick.
	OnTick func(Tick)
}

// WeightChange sets member Member's weight to Weight at At.
type WeightChange struct {
	At     time.Duration `json:"at"`
	Member string        `json:"member"`
	Weight float64       `json:"weight"`
}

// SharedResult is a finished shared run.
type SharedResult struct {
	Layout  SharedLayout   `json:"layout"`
	Metrics sim.Metrics    `json:"metrics"`
	Members []MemberResult `json:"members"`
	// FairShareErrorMax is the largest |allowed - fair share| / R over the
	// settled ticks (shared layout only): the fair share is the split of R
	// by the members' true demands (backlogged: any amount; otherwise their
	// producers' rate with loop.MemberHeadroom, at least loop.MemberProbe,
	// the part above the producers' rate a margin given again to the
	// backlogged).
	FairShareErrorMax float64 `json:"fair_share_error_max"`
	// FairShareErrorAt and FairShareErrorMember say when (seconds) and
	// where it was.
	FairShareErrorAt     float64 `json:"fair_share_error_at_s"`
	FairShareErrorMember string  `json:"fair_share_error_member,omitempty"`
	// SecondsAboveSP5 is the time the CPU spent above setpoint + 5 points
	// after the last burst began; MaxCPU the highest CPU; Lost the
	// messages no counter accounts for.
	SecondsAboveSP5 float64 `json:"seconds_above_sp5"`
	MaxCPU          float64 `json:"max_cpu"`
	Lost            int64   `json:"lost"`
	// Oscillation is the total variation of the sum of the allowed rates
	// per hour over their mean: how much the rate swings.
	Oscillation float64    `json:"oscillation"`
	Series      sim.Series `json:"-"`
	// Allowed and Processed are each member's rates per second, in
	// Members' order (for the plot).
	Allowed   [][]float64 `json:"-"`
	Processed [][]float64 `json:"-"`
}

// MemberResult is one member's outcome.
type MemberResult struct {
	Name     string  `json:"name"`
	Weight   float64 `json:"weight"`
	Priority int     `json:"priority"`
	// MeanAllowed, MeanProcessed and MeanFairShare are means over the run,
	// messages/s.
	MeanAllowed   float64 `json:"mean_allowed"`
	MeanProcessed float64 `json:"mean_processed"`
	MeanFairShare float64 `json:"mean_fair_share"`
	Produced      int64   `json:"produced"`
	Stored        int64   `json:"stored"`
	Queued        int64   `json:"queued"`
}

// sharedQueue is one queue and its consumer.
type sharedQueue struct {
	m                SharedMember
	loop             string
	queued, produced int64
	stored           int64
	carry, credit    float64
	allowed, fair    float64
	sumAllowed       float64
	sumFair          float64
	sumDone          float64
	hungry           bool
	rate             float64 // the producers' rate at the last tick
}

// sharedWorld is a shared run in progress.
type sharedWorld struct {
	cfg    SharedConfig
	s      sim.Scenario
	store  *memstore.Store
	ticker *loop.Ticker
	plant  *sim.Plant
	pipe   *sim.Pipeline
	qs     []*sharedQueue
	now    time.Duration
	res    SharedResult
	// settled counts the ticks since the members' demands last changed.
	settled int
	ticks   int
	start   time.Time
	// lastTick and lastStored are the time and total count at the last
	// tick (the rate consumed since, for OnTick).
	lastTick   time.Duration
	lastStored int64
}

// RunShared runs cfg to its scenario's end.
func RunShared(ctx context.Context, cfg SharedConfig) (SharedResult, error) {
	sm, err := StartShared(cfg)
	if err != nil {
		return SharedResult{}, err
	}
	if err := sm.Advance(ctx, cfg.Scenario.Duration); err != nil {
		return SharedResult{}, err
	}
	return sm.w.result(), nil
}

// SharedSim is a shared run in stepping mode: virtual time moves only when
// Advance lets it (the dashboard's demo). Not safe for concurrent use
// beyond its Store.
type SharedSim struct {
	w   *sharedWorld
	at  time.Duration // the next second to integrate
	err error
}

// StartShared returns a shared run at virtual time zero.
func StartShared(cfg SharedConfig) (*SharedSim, error) {
	w, err := newSharedWorld(cfg)
	if err != nil {
		return nil, err
	}
	return &SharedSim{w: w}, nil
}

// Advance moves the run d further (at most to its scenario's end),
// one-second plant steps, the controller ticking when due.
func (sm *SharedSim) Advance(ctx context.Context, d time.Duration) error {
	if sm.err != nil {
		return sm.err
	}
	w := sm.w
	if sm.at >= w.s.Duration {
		return fmt.Errorf("shared run: its %v are over", w.s.Duration)
	}
	end := min(sm.at+d, w.s.Duration)
	for ; sm.at < end; sm.at += time.Second {
		w.now = sm.at
		if err := ctx.Err(); err != nil {
			return err
		}
		if sm.err = w.edits(ctx); sm.err == nil && w.now%w.s.Tick == 0 {
			sm.err = w.tick(ctx)
		}
		if sm.err == nil {
			sm.err = w.step(ctx)
		}
		if sm.err != nil {
			return sm.err
		}
	}
	return nil
}

// Err returns why the run stopped, nil while it runs.
func (sm *SharedSim) Err() error { return sm.err }

// Now returns the virtual time the run reached.
func (sm *SharedSim) Now() time.Time { return sm.w.clock() }

// Store returns the loops' item store (PARAMS, STATE, RATE).
func (sm *SharedSim) Store() *memstore.Store { return sm.w.store }

// Loops returns the loop ids of the run: the destination's first (in the
// naive layout, one per queue), then the members'.
func (sm *SharedSim) Loops() []string {
	ids := sm.w.controllerLoops()
	if sm.w.cfg.Layout == LayoutShared {
		for _, q := range sm.w.qs {
			ids = append(ids, q.loop)
		}
	}
	return ids
}

// Close ends the run.
func (sm *SharedSim) Close() {}

// DestinationID is the destination's loop id in a shared run (and the one
// loop's in LayoutSingle).
const DestinationID = "db"

func newSharedWorld(cfg SharedConfig) (*sharedWorld, error) {
	s := cfg.Scenario
	if len(cfg.Members) == 0 {
		return nil, fmt.Errorf("shared run: no members")
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	w := &sharedWorld{cfg: cfg, s: s, store: memstore.New(),
		plant: sim.NewPlant(s.Plant, time.Second, 0),
		pipe:  sim.NewPipeline(s.MetricPeriod, s.MetricDelay, s.Noise, rand.New(rand.NewPCG(s.Seed, 0x5eed)), s.Plant.Base)}
	w.res.Layout, w.start = cfg.Layout, cfg.Start
	if w.start.IsZero() {
		w.start = epoch
	}
	w.ticker = &loop.Ticker{Sources: metricsources.All(), Store: w.store,
		Metrics: map[string]metric.Reader{cfg.Params.Metric.Source: w}, Now: w.clock}
	ctx := context.Background()
	for _, m := range cfg.Members {
		q := &sharedQueue{m: m, loop: m.Name, queued: m.Backlog, produced: m.Backlog}
		w.qs = append(w.qs, q)
		switch cfg.Layout {
		case LayoutShared:
			attrs := map[string]any{loop.AttrDestination: DestinationID, loop.AttrWeight: m.Weight,
				loop.AttrPriority: float64(m.Priority), "min_rate": 0.0, "max_rate": cfg.Params.MaxRate}
			if !cfg.NoDepth {
				attrs["depth_queue"] = m.Name
			}
			if err := w.store.WriteParams(ctx, m.Name, attrs); err != nil {
				return nil, err
			}
		case LayoutNaive:
			p := cfg.Params
			p.Loop = m.Name
			if err := w.store.WriteParams(ctx, m.Name, p.Attrs(metricsources.All())); err != nil {
				return nil, err
			}
		default:
			q.loop = DestinationID
		}
	}
	if cfg.Layout != LayoutNaive {
		p := cfg.Params
		p.Loop = DestinationID
		if err := w.store.WriteParams(ctx, DestinationID, p.Attrs(metricsources.All())); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *sharedWorld) clock() time.Time { return w.start.Add(w.now) }

// loops are the loop ids whose PARAMS hold the controller.
func (w *sharedWorld) controllerLoops() []string {
	if w.cfg.Layout != LayoutNaive {
		return []string{DestinationID}
	}
	ids := make([]string, len(w.qs))
	for i, q := range w.qs {
		ids[i] = q.loop
	}
	return ids
}

// edits applies the operator's edits due now: the setpoint (of the
// controllers' PARAMS) and the members' weights.
func (w *sharedWorld) edits(ctx context.Context) error {
	edit := func(id, attr string, v float64) error {
		a, err := w.store.ReadParams(ctx, id)
		if err != nil {
			return err
		}
		a[attr] = v
		w.settled = 0
		return w.store.WriteParams(ctx, id, a)
	}
	for _, c := range w.s.SetpointChanges {
		if c.At == w.now {
			for _, id := range w.controllerLoops() {
				if err := edit(id, loop.AttrSetpoint, c.Value); err != nil {
					return fmt.Errorf("edit setpoint: %w", err)
				}
			}
		}
	}
	for _, c := range w.cfg.WeightChanges {
		if c.At == w.now && w.cfg.Layout == LayoutShared {
			if err := edit(c.Member, loop.AttrWeight, c.Weight); err != nil {
				return fmt.Errorf("edit weight: %w", err)
			}
			for _, q := range w.qs {
				if q.m.Name == c.Member {
					q.m.Weight = c.Weight
				}
			}
		}
	}
	return nil
}

// tick runs the controller tick and reads every member's RATE.
func (w *sharedWorld) tick(ctx context.Context) error {
	reports, err := w.ticker.Tick(ctx)
	if err != nil {
		return err
	}
	total := 0.0
	for _, r := range reports {
		if r.Err != nil {
			return fmt.Errorf("tick at %v: %s: %w", w.now, r.Loop, r.Err)
		}
		if r.Loop == DestinationID {
			total = r.Rate
		}
	}
	for _, q := range w.qs {
		rate, err := w.store.ReadRate(ctx, q.loop)
		if err != nil {
			return fmt.Errorf("tick at %v: RATE of %s: %w", w.now, q.loop, err)
		}
		q.allowed = rate.PerSecond
	}
	if w.cfg.Layout == LayoutShared {
		w.fairShares(total)
	}
	w.ticks++
	if w.cfg.OnTick != nil {
		w.cfg.OnTick(w.tickView(reports))
	}
	return nil
}

// fairShares computes the members' fair shares of total from their true
// demands and records the largest error of the settled ticks.
func (w *sharedWorld) fairShares(total float64) {
	claims := make([]fairshare.Claim, len(w.qs))
	var weights float64
	for _, q := range w.qs {
		weights += q.m.Weight
	}
	changed := false
	for i, q := range w.qs {
		rate := w.producerRate(q, w.now)
		hungry := float64(q.queued) > rate*w.s.Tick.Seconds()
		changed = changed || hungry != q.hungry || rate != q.rate
		q.hungry, q.rate = hungry, rate
		demand, margin := math.Inf(1), 0.0
		if !hungry {
			demand = max(rate*(1+loop.MemberHeadroom), loop.MemberProbe*total*q.m.Weight/weights)
			margin = demand - rate
		}
		claims[i] = fairshare.Claim{Weight: q.m.Weight, Priority: q.m.Priority, Max: w.cfg.Params.MaxRate, Demand: demand, Margin: margin}
	}
	if changed {
		w.settled = 0
	}
	for i, share := range fairshare.Split(total, claims) {
		q := w.qs[i]
		q.fair = share
		if w.settled >= 3 && w.now >= 10*time.Minute && total > 0 {
			if e := math.Abs(q.allowed-share) / total; e > w.res.FairShareErrorMax {
				w.res.FairShareErrorMax, w.res.FairShareErrorAt, w.res.FairShareErrorMember = e, w.now.Seconds(), q.m.Name
			}
		}
	}
	w.settled++
}

func (w *sharedWorld) producerRate(q *sharedQueue, t time.Duration) float64 {
	s := sim.Scenario{ProducerRate: q.m.Rate, ProducerChanges: q.m.ProducerChanges}
	return s.ProducerRateAt(t)
}

// step integrates one second: the producers fill the queues, the consumers
// drain them at their rates and report, the plant takes what they stored.
func (w *sharedWorld) step(ctx context.Context) error {
	t := w.now
	for _, q := range w.qs {
		q.carry += w.producerRate(q, t)
		n := int64(q.carry)
		q.carry -= float64(n)
		for _, b := range q.m.Bursts {
			if b.At == t {
				n += b.N
			}
		}
		q.queued += n
		q.produced += n
	}
	done := w.consume()
	if t%(2*time.Second) == 0 {
		if err := w.reportLeases(ctx); err != nil {
			return err
		}
	}
	y := w.plant.Step(done, w.s.DisturbanceAt(t))
	w.pipe.Observe(t, time.Second, y)
	w.pipe.Publish(t + time.Second)
	w.record(y, done)
	return nil
}

// consume drains each queue at its rate (in LayoutSingle, the one queue
// that all of them are, at the one rate) and returns the messages stored.
func (w *sharedWorld) consume() float64 {
	take := func(q *sharedQueue, rate float64, queued int64) int64 {
		q.credit += rate
		n := min(int64(q.credit), queued)
		q.credit = min(q.credit-float64(n), max(1, rate))
		return n
	}
	var done int64
	if w.cfg.Layout == LayoutSingle {
		var queued int64
		for _, q := range w.qs {
			queued += q.queued
		}
		n := take(w.qs[0], w.qs[0].allowed, queued)
		done = n
		for i, q := range w.qs { // oldest first across the queues: by their length
			k := n
			if i < len(w.qs)-1 && queued > 0 {
				k = min(q.queued, int64(math.Round(float64(done)*float64(q.queued)/float64(queued))), n)
			}
			k = min(k, q.queued)
			q.queued -= k
			q.stored += k
			q.sumDone += float64(k)
			n -= k
		}
		return float64(done - n)
	}
	for _, q := range w.qs {
		n := take(q, q.allowed, q.queued)
		q.queued -= n
		q.stored += n
		q.sumDone += float64(n)
		done += n
	}
	return float64(done)
}

// reportLeases refreshes every consumer's lease with its running count,
// stamped with the end of the second just integrated (the count holds that
// second's messages).
func (w *sharedWorld) reportLeases(ctx context.Context) error {
	now := w.clock().Add(time.Second)
	peer := func(id, instance string, stored int64) error {
		return w.store.ReportPeer(ctx, protocol.Peer{Loop: id, Instance: instance, Stored: stored,
			StartedAt: w.start, ReportedAt: now, ExpiresAt: now.Add(90 * time.Second)})
	}
	if w.cfg.Layout == LayoutSingle {
		var stored int64
		for _, q := range w.qs {
			stored += q.stored
		}
		return peer(DestinationID, "consumer", stored)
	}
	for _, q := range w.qs {
		if err := peer(q.loop, "consumer-"+q.m.Name, q.stored); err != nil {
			return err
		}
	}
	return nil
}

// record appends the second's values to the series.
func (w *sharedWorld) record(y, done float64) {
	ser := &w.res.Series
	measured := math.NaN()
	if dp, ok := w.pipe.Latest(); ok {
		measured = dp.Value
	}
	allowed := 0.0
	if w.cfg.Layout == LayoutSingle {
		allowed = w.qs[0].allowed
	}
	if len(w.res.Allowed) == 0 {
		w.res.Allowed, w.res.Processed = make([][]float64, len(w.qs)), make([][]float64, len(w.qs))
	}
	for i, q := range w.qs {
		if w.cfg.Layout != LayoutSingle {
			allowed += q.allowed
		}
		q.sumAllowed += q.allowed
		q.sumFair += q.fair
		w.res.Allowed[i] = append(w.res.Allowed[i], q.allowed)
		w.res.Processed[i] = append(w.res.Processed[i], q.sumDone)
	}
	ser.T = append(ser.T, (w.now + time.Second).Seconds())
	ser.Setpoint = append(ser.Setpoint, w.s.SetpointAt(w.now))
	ser.CPU = append(ser.CPU, y)
	ser.Measured = append(ser.Measured, measured)
	ser.Allowed = append(ser.Allowed, allowed)
	ser.Processed = append(ser.Processed, done)
}

// result measures the run.
func (w *sharedWorld) result() SharedResult {
	res := w.res
	n := float64(len(res.Series.T))
	var counts sim.Counts
	firstBurst := w.s.Duration
	for i, q := range w.qs {
		counts.Produced += q.produced
		counts.Processed += q.stored
		counts.Queued += q.queued
		for _, b := range q.m.Bursts {
			firstBurst = min(firstBurst, b.At)
		}
		res.Members = append(res.Members, MemberResult{Name: q.m.Name, Weight: q.m.Weight, Priority: q.m.Priority,
			MeanAllowed: q.sumAllowed / n, MeanProcessed: float64(q.stored) / n, MeanFairShare: q.sumFair / n,
			Produced: q.produced, Stored: q.stored, Queued: q.queued})
		res.Processed[i] = perSecond(res.Processed[i])
	}
	res.Metrics = sim.Measure(w.s, res.Series, counts)
	res.MaxCPU, res.Lost = res.Metrics.MaxCPU, counts.Lost()
	var tv, sum float64
	for i, t := range res.Series.T {
		if time.Duration(t*float64(time.Second)) > firstBurst && res.Series.CPU[i] > res.Series.Setpoint[i]+sim.ViolationMargin {
			res.SecondsAboveSP5++
		}
		sum += res.Series.Allowed[i]
		if i > 0 {
			tv += math.Abs(res.Series.Allowed[i] - res.Series.Allowed[i-1])
		}
	}
	if sum > 0 {
		res.Oscillation = tv / w.s.Duration.Hours() / (sum / n)
	}
	return res
}

// perSecond turns a running count into its increase per second.
func perSecond(running []float64) []float64 {
	out := make([]float64, len(running))
	for i := range running {
		if i > 0 {
			out[i] = running[i] - running[i-1]
		} else {
			out[i] = running[i]
		}
	}
	return out
}

// ReadMetrics returns the newest published datapoint for every query
// (metric.Reader): every loop reads the one database's CPU; a member's
// queue depth (depth_queue, its name) is its queue's at the tick, and its
// oldest message's age is not known.
func (w *sharedWorld) ReadMetrics(_ context.Context, queries []metric.Query, _ time.Time) ([]metric.Sample, error) {
	out := make([]metric.Sample, len(queries))
	dp, ok := w.pipe.Latest()
	for i, q := range queries {
		if queue := q.Dimensions[loop.DepthDimension]; q.Namespace == loop.DepthNamespace {
			for _, sq := range w.qs {
				if sq.m.Name == queue && q.Metric == loop.DepthMetric {
					out[i] = metric.Sample{Value: float64(sq.queued), Time: w.clock(), Found: true}
				}
			}
			continue
		}
		if ok {
			out[i] = metric.Sample{Value: dp.Value, Time: w.start.Add(dp.Start), Found: true}
		}
	}
	return out, nil
}

// SharedScenario is the default shared run: three queues into the reference
// database (no outside disturbance), weights 3:2:1 with the third in a lower
// class. orders runs at 500 messages/s; billing is idle, then
// a burst of 300,000 at 50 min and 200 messages/s after; reindex is a
// backfill of 2,000,000. The destination's setpoint is edited from 70 % to
// 50 % at 120 min; orders' weight from 3 to 1 at 150 min.
func SharedScenario() (sim.Scenario, []SharedMember, []WeightChange) {
	s := sim.Reference()
	s.Disturbances, s.ProducerRate, s.Backlog = nil, 0, 0
	members := []SharedMember{
		{Name: "orders", Weight: 3, Rate: 500},
		{Name: "billing", Weight: 2, Bursts: []sim.Burst{{At: 50 * time.Minute, N: 300_000}},
			ProducerChanges: []sim.ProducerChange{{At: 50 * time.Minute, Rate: 200}}},
		{Name: "reindex", Weight: 1, Priority: -1, Backlog: 5_000_000},
	}
	return s, members, []WeightChange{{At: 150 * time.Minute, Member: "orders", Weight: 1}}
}

// tickView is the tick for OnTick: the rate all the queues' consumers
// stored since the previous tick, and their depth.
func (w *sharedWorld) tickView(reports []loop.Report) Tick {
	var stored, depth int64
	for _, q := range w.qs {
		stored += q.stored
		depth += q.queued
	}
	consumed := math.NaN()
	if w.now > w.lastTick {
		consumed = float64(stored-w.lastStored) / (w.now - w.lastTick).Seconds()
	}
	w.lastTick, w.lastStored = w.now, stored
	return Tick{Now: w.clock(), Reports: reports, Consumed: consumed, Depth: depth}
}
