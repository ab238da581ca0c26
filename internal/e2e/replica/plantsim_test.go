package main

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// simPlant is a model of make e2e-replica's plant, fast enough to try the
// harness's tuning on many seeds: the consumers write the orders in
// transactions of capacityBatch at RATE (from the tick after next second),
// the primary takes them at once (its CPU base + gain x rate, published as
// 5-s averages), the replica applies them one transaction after another at
// its own capacity (which may stall), and the lag is the heartbeat's: the
// age of the newest heartbeat (written every 250 ms) the replica applied,
// read every second. The production tick (loop.Ticker over memstore) runs
// every 5 s on it, with the PARAMS the harness writes.
type simPlant struct {
	// Capacity is what the replica applies in the loop, orders/s; the
	// capacity test measured Tested, the steady capacity test Measured
	// (0: none; the tuning then has Tested).
	Capacity, Tested, Measured float64
	// CPUGain and CPUBase make the primary's CPU.
	CPUGain, CPUBase float64
	// Stalls are the replica's pauses: [at, at+for) it applies nothing.
	Stalls [][2]time.Duration
	// Noise is the relative spread of each transaction's apply time.
	Noise float64
	// Fetch is the longest time the replica's threads take to pick up
	// what the primary wrote (each wait uniform in [Fetch/4, Fetch]; 0: at
	// once): the real pair's heartbeat lag saw-tooths by 1 to 2.5 s from
	// one reading to the next at a rate below its capacity, as if the
	// replica saw the binary log in chunks. 2 s reproduces runs 13 to 24
	// (TestModelReproducesTheRealRuns).
	Fetch time.Duration
	Seed  uint64
	// Trace, when set, is told every tick's STATE.
	Trace func(at float64, st loop.State)
}

type simTxn struct {
	at     float64 // written on the primary, s
	orders int     // 0: a heartbeat
}

// simulate runs the harness's scenario (cfg's settings, duration and
// settling) on the model and returns its figures and failures (analyse and
// check of the real run).
func (pl simPlant) simulate(cfg config) (Result, []string) {
	const h = 0.05 // s
	rng := rand.New(rand.NewPCG(pl.Seed, 7))
	r := &run{Harness: e2ekit.Harness[config, Result]{Run: e2ekit.Run{Name: "sim", Start: time.Now()}, Cfg: cfg}}
	r.Res.CPUGain, r.Res.ReplicaCapacity, r.Res.ReplicaSteadyCapacity, r.baseCPU = pl.CPUGain, pl.Tested, pl.Measured, pl.CPUBase
	r.loopID, r.instance = "sim", "primary"
	p, err := r.params()
	if err != nil {
		return r.Res, []string{err.Error()}
	}
	ctx := context.Background()
	store := memstore.New()
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var now float64
	clock := func() time.Time { return epoch.Add(time.Duration(now * float64(time.Second))) }
	// 5-s CloudWatch datapoints (t: the period's start), the primary idle
	// before the loop starts.
	cpuPoints := []point{{t: -5 * time.Second, v: pl.CPUBase}}
	var lagRead float64    // the signal: the exporter's newest reading, or their mean over -lag-window
	var readings []float64 // the exporter's 1-s readings
	metrics := readerFunc(func(qs []metric.Query) []metric.Sample {
		out := make([]metric.Sample, len(qs))
		for i, q := range qs {
			if q.Source == prommetric.Name {
				out[i] = metric.Sample{Value: lagRead, Time: clock(), Found: true}
			} else if n := len(cpuPoints); n > 0 {
				out[i] = metric.Sample{Value: cpuPoints[n-1].v, Time: epoch.Add(cpuPoints[n-1].t), Found: true}
			}
		}
		return out
	})
	t := &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{cwmetric.Name: metrics, prommetric.Name: metrics}, Now: clock}
	if err := store.WriteParams(ctx, r.loopID, p.Attrs(looptest.Sources())); err != nil {
		return r.Res, []string{err.Error()}
	}
	var (
		queue                        []simTxn // written, not applied
		rate, credit                 = 0.0, 0.0
		stored                       int
		busyUntil                    float64
		applying                     *simTxn
		newestHB                     float64
		cpuSum                       float64
		cpuN                         int
		nextTick, nextHB, nextSecond float64
		nextRate                     = math.Inf(1)
		pending                      float64
		visible, nextFetch           float64
	)
	started := epoch
	end := (cfg.duration + 5*time.Second).Seconds()
	for now = 0; now < end; now += h {
		if now >= nextTick {
			nextTick += cfg.Tick.Seconds()
			_ = store.ReportPeer(ctx, protocol.Peer{Loop: r.loopID, Instance: "c", Stored: int64(stored), StartedAt: started, ReportedAt: clock(), ExpiresAt: clock().Add(time.Minute)})
			reps, _ := t.Tick(ctx)
			if len(reps) > 0 {
				r.limiting = append(r.limiting, limitingPoint{t: sec(now), sig: reps[0].Limiting})
			}
			if st, err := store.ReadState(ctx, r.loopID); err == nil && pl.Trace != nil {
				pl.Trace(now, st)
			}
			if rt, err := store.ReadRate(ctx, r.loopID); err == nil {
				pending, nextRate = rt.PerSecond, now+1
			}
		}
		if now >= nextRate {
			rate, nextRate = pending, math.Inf(1)
		}
		// The consumers: a transaction of capacityBatch orders when the
		// pace allows it.
		credit += rate * h
		if credit >= capacityBatch {
			credit -= capacityBatch
			queue = append(queue, simTxn{at: now, orders: capacityBatch})
			stored += capacityBatch
		}
		if now >= nextHB {
			nextHB += 0.25
			queue = append(queue, simTxn{at: now})
		}
		// The replica, which sees what was written up to visible.
		if now >= nextFetch {
			visible = now
			nextFetch = now + pl.Fetch.Seconds()*(0.25+0.75*rng.Float64())
		}
		for now >= busyUntil && !pl.stalled(now) {
			if applying != nil {
				if applying.orders == 0 {
					newestHB = applying.at
				}
				applying = nil
			}
			if len(queue) == 0 || queue[0].at > visible {
				break
			}
			txn := queue[0]
			queue = queue[1:]
			applying = &txn
			d := 0.002
			if txn.orders > 0 {
				d = float64(txn.orders) / pl.Capacity * math.Max(0.2, 1+pl.Noise*rng.NormFloat64())
			}
			busyUntil = math.Max(busyUntil, txn.at) + d
		}
		cpuSum += pl.CPUBase + pl.CPUGain*rate
		cpuN++
		if now >= nextSecond {
			nextSecond++
			readings = append(readings, math.Max(0, now-newestHB))
			lagRead = readings[len(readings)-1]
			if w := int(cfg.lagWindow.Seconds()); w > 1 && len(readings) >= w {
				// PromQL's avg_over_time over the window.
				lagRead = 0
				for _, v := range readings[len(readings)-w:] {
					lagRead += v / float64(w)
				}
			}
			r.lag = append(r.lag, point{t: sec(now), v: readings[len(readings)-1]})
			r.rate = append(r.rate, point{t: sec(now), v: rate})
			if int(math.Round(now))%5 == 0 && cpuN > 0 {
				r.cpu = append(r.cpu, point{t: sec(now), v: cpuSum / float64(cpuN)})
				cpuPoints = append(cpuPoints, point{t: sec(now - 5), v: cpuSum / float64(cpuN)})
				cpuSum, cpuN = 0, 0
			}
		}
	}
	r.Res.Sent, r.Res.Stored, r.Res.ReplicaStored, r.Res.Ticks = stored, stored, stored, len(r.limiting)
	r.analyse(sec(end))
	r.check()
	return r.Res, r.Failures
}

func (pl simPlant) stalled(now float64) bool {
	for _, s := range pl.Stalls {
		if now >= s[0].Seconds() && now < (s[0]+s[1]).Seconds() {
			return true
		}
	}
	return false
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

type readerFunc func([]metric.Query) []metric.Sample

func (f readerFunc) ReadMetrics(_ context.Context, qs []metric.Query, _ time.Time) ([]metric.Sample, error) {
	return f(qs), nil
}
