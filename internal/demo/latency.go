package demo

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// concurrency is how many stores the demo's one consumer stands for at
// once: a batch takes its latency per message x its size / concurrency of
// virtual time, so that one consumer can carry the whole rate. The inner
// loop works on the latency's ratio to its reference, which the scale does
// not change.
const concurrency = 100

// withLatency sets up the destination's latency when the scenario has one.
func (w *world) withLatency() {
	if l := w.s.Latency; l != nil {
		w.lat = sim.NewLatencyMeter(*l, w.s.Seed)
	}
	w.cpu = w.s.Plant.Base
}

// storeTime lets a store of n messages take its time under the inner loop
// (which measures it); without one the destination answers at once. It
// advances the world without blocking (in stepping mode at most to the
// gate's limit), and the messages are stored whether or not the run ends
// meanwhile.
func (w *world) storeTime(ctx context.Context, n int) {
	if w.lat == nil || w.cfg.Inner == nil || n == 0 || w.t >= w.s.Duration {
		return
	}
	per := w.lat.At(w.cpu, w.s.Plant.Base+w.s.DisturbanceAt(w.t))
	to := w.now + time.Duration(per*float64(n)/concurrency*float64(time.Second))
	if w.gate != nil {
		lim, _ := w.gate.limit()
		to = min(to, lim)
	}
	w.advance(ctx, to)
}

// recordLatency appends the step's latency per message (ms, at the
// destination's CPU and outside load d, without noise) and the consumer's
// pace.
func (w *world) recordLatency(d float64) {
	if w.lat == nil {
		return
	}
	w.series.Latency = append(w.series.Latency, 1000*w.s.Latency.Mean(w.cpu, w.s.Plant.Base+d))
	if w.pace != nil {
		w.series.Paced = append(w.series.Paced, w.pace())
	}
}

// WithInner turns the consumers' inner loop on in cfg, for a destination
// identified as m: in PARAMS (inner_loop, with the reaction time the step
// test suggests) and in the consumer, which reads it from there. Not
// without a latency to measure, nor without the consumers' report: the
// controller must be told what the cut withheld, or it takes the cut for a
// plant that took less and the two loops fight.
func WithInner(cfg *Config, m lab.Model) {
	if cfg.Scenario.Latency == nil || cfg.NoReport {
		return
	}
	rt := lab.InnerReactionTime(control.FOPDT{Gain: m.Gain, Base: m.Base,
		Tau: time.Duration(m.TauS * float64(time.Second)), DeadTime: time.Duration(m.DeadTimeS * float64(time.Second))})
	cfg.Params.Inner = &loop.InnerParams{Tolerance: loop.DefaultInnerTolerance, ReactionTime: rt}
	ic, _ := cfg.Params.InnerConfig()
	cfg.Inner = &ic
}
