package loop_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// plantLoop runs the production tick (Ticker, memstore) against a simulated
// destination: an FOPDT plant stepped every second at the rate in RATE, and a
// CloudWatch-like metric pipeline (period averages published late).
type plantLoop struct {
	t       testing.TB
	id      string
	store   *memstore.Store
	clock   *fakeClock
	ticker  *loop.Ticker
	plant   *sim.Plant
	pipe    *sim.Pipeline
	epoch   time.Time
	now     time.Duration // simulated time since epoch
	rate    float64       // what the consumers apply
	dist    float64       // outside load, points of CPU
	outage  bool          // no datapoint is returned while set
	lastCPU float64
}

// newPlantLoop returns a loop "a" on plant m, at steady state at rate u0, with
// a metric of period averages published delay after the period ends.
func newPlantLoop(t testing.TB, m control.FOPDT, u0 float64, period, delay time.Duration) *plantLoop {
	epoch := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	pl := &plantLoop{
		t: t, id: "a", store: memstore.New(), clock: &fakeClock{now: epoch},
		plant: sim.NewPlant(m, time.Second, u0), epoch: epoch, rate: u0,
	}
	pl.lastCPU = pl.plant.CPU(0)
	pl.pipe = sim.NewPipeline(period, delay, 0, nil, pl.lastCPU)
	pl.ticker = &loop.Ticker{Sources: looptest.Sources(), Store: pl.store, Metrics: map[string]metric.Reader{cwmetric.Name: pl}, Now: pl.clock.Now}
	return pl
}

// ReadMetrics answers every query with the newest published datapoint.
func (pl *plantLoop) ReadMetrics(_ context.Context, qs []metric.Query, _ time.Time) ([]metric.Sample, error) {
	out := make([]metric.Sample, len(qs))
	dp, ok := pl.pipe.Latest()
	for i := range out {
		if ok && !pl.outage {
			out[i] = metric.Sample{Value: dp.Value, Time: pl.epoch.Add(dp.Start), Found: true}
		}
	}
	return out, nil
}

// params writes PARAMS: a valid CloudWatch loop with a 60 s metric, edited.
func (pl *plantLoop) params(edit func(a map[string]any)) {
	pl.t.Helper()
	a := valid(func(a map[string]any) { a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": pl.id} })
	if edit != nil {
		edit(a)
	}
	if err := pl.store.WriteParams(context.Background(), pl.id, a); err != nil {
		pl.t.Fatal(err)
	}
}

// tick runs the Ticker now and returns the loop's report; the consumers take
// the rate it wrote.
func (pl *plantLoop) tick() loop.Report {
	pl.t.Helper()
	pl.clock.now = pl.epoch.Add(pl.now)
	reports, err := pl.ticker.Tick(context.Background())
	if err != nil {
		pl.t.Fatalf("Tick: %v", err)
	}
	rep := reports[0]
	if rep.RateWritten {
		pl.rate = rep.Rate
	}
	return rep
}

// run advances the plant by d at the consumers' rate and returns the peak
// true CPU over it.
func (pl *plantLoop) run(d time.Duration) float64 {
	peak := math.Inf(-1)
	for range int(d / time.Second) {
		pl.lastCPU = pl.plant.Step(pl.rate, pl.dist)
		pl.pipe.Observe(pl.now, time.Second, pl.lastCPU)
		pl.now += time.Second
		pl.pipe.Publish(pl.now)
		peak = math.Max(peak, pl.lastCPU)
	}
	return peak
}

// step ticks, then runs the plant for one tick period (60 s); it returns the
// report and the peak true CPU after the tick.
func (pl *plantLoop) step() (loop.Report, float64) {
	pl.t.Helper()
	rep := pl.tick()
	return rep, pl.run(time.Minute)
}
