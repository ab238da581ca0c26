package main

import (
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// lagPromQL is the lag signal's query: the harness' exporter, scraped every
// second by replica.sh's Prometheus; with a window, the readings' mean over
// it (the replica applies the consumers' transactions of 2,000 rows one at a
// time under its CPU cap, so the heartbeat's age saw-tooths by a second or
// two from one reading to the next: a tick that samples one reading every
// 5 s aliases that into its derivative).
func lagPromQL(window time.Duration) string {
	if window <= 0 {
		return "max(sluice_replica_lag_seconds)"
	}
	return fmt.Sprintf("max(avg_over_time(sluice_replica_lag_seconds[%ds]))", int(window.Seconds()))
}

// params is the loop's PARAMS: the CPU (the first signal, CloudWatch) tuned
// from the CPU per order measured by the capacity test, the lag (Prometheus)
// tuned for an integrating process whose gain is 1/capacity: the replica's
// capacity under the loop's own writes when measured (measureInLoop), else
// the capacity test's.
func (r *run) params() (loop.Params, error) {
	c := r.Cfg
	capacity := r.Res.ReplicaCapacity
	if r.Res.ReplicaSteadyCapacity > 0 {
		capacity = r.Res.ReplicaSteadyCapacity
	}
	if r.Res.CPUGain <= 0 || capacity <= 0 {
		return loop.Params{}, fmt.Errorf("no CPU gain (%g) or replica capacity (%g) measured", r.Res.CPUGain, capacity)
	}
	// CPU: SIMC PI on the loop model with the lab's delay-aware integral
	// time, as make e2e tunes after its step test.
	m := control.FOPDT{Gain: r.Res.CPUGain, Tau: time.Second, DeadTime: time.Second, Base: r.baseCPU}
	if c.cpuSetpoint <= 0 {
		// Reachable, so that the CPU limits first, at -cpu-at times the rate
		// the replica keeps up with (never above 90 % of max_rate);
		// out of reach while the lag limits.
		c.cpuSetpoint = math.Round(m.Output(min(c.cpuAt*capacity, 0.9*c.MaxRate)))
		r.Cfg.cpuSetpoint = c.cpuSetpoint
	}
	s := sim.Scenario{Plant: m, MetricPeriod: c.Tick, MetricDelay: c.Tick, Tick: c.Tick, Setpoint: c.cpuSetpoint, MaxRate: c.MaxRate}
	g, err := tuning.Tune(tuning.LoopModel(m, s.PipelineDelay()), tuning.SIMC, tuning.Options{Form: tuning.PI})
	if err != nil {
		return loop.Params{}, fmt.Errorf("tune the CPU: %w", err)
	}
	tc := lab.IntegralTime(s, lab.Plant{Model: m})
	cpuKp, cpuKi := g.Kp, 1/(m.Gain*tc.Seconds())
	// Lag: an integrator, d lag/dt = (rate - capacity)/capacity (k' =
	// 1/capacity), behind the tick and the exporter's and Prometheus'
	// second each (theta). SIMC for an integrating process: Kc = 1/(k'
	// (tau_c + theta)), Ti = 4 (tau_c + theta); tau_c = 2 theta by default
	// (-lag-tau-c), so that an overshoot does not cut the rate to min_rate.
	theta := c.Tick.Seconds() + 2 + c.lagThetaExtra
	tauC := c.tauC * theta
	lagKp := capacity / (tauC + theta)
	lagKi := lagKp / (4 * (tauC + theta))
	// The lag's slope is the rate's excess over what the replica applies,
	// divided by that capacity: a derivative term of the capacity
	// (-lag-kd 1) takes back the whole excess the lag shows before it
	// reaches its setpoint (half of it let a slew-limited ramp overshoot
	// to 20 s: docs/replica.md).
	lagKd := c.lagKd * capacity
	// The slew limit (an operator's knob) bounds how fast the rate climbs,
	// under both signals: a lag at 0 asks only for one slew step more
	// (control.SignalInput.AtFloor), so the rate crosses the replica's
	// capacity slowly enough for the lag controller to see the lag rise
	// before it overshoots (without it the CPU controller's feedforward bid
	// 1.6 times the capacity at each hand-over: a limit cycle).
	slew := math.Round(c.slew*capacity*10) / 10
	r.Res.Gains = gains{CPUKp: e2ekit.Round(cpuKp, 4), CPUKi: e2ekit.Round(cpuKi, 4), LagKp: e2ekit.Round(lagKp, 4), LagKi: e2ekit.Round(lagKi, 4), LagKd: e2ekit.Round(lagKd, 4), SlewLimit: slew}
	p := loop.Params{
		Loop: r.loopID, Enabled: true, Mode: loop.ModeAuto, SignalName: "cpu",
		Controls: loop.Controls{Setpoint: c.cpuSetpoint, Kp: cpuKp, Ki: cpuKi, AntiWindup: control.AntiWindupNone, DelayAware: true,
			SetpointFilter: max(time.Second, lab.SetpointFilter(tuning.LoopModel(m, s.PipelineDelay())).Round(time.Second))},
		Feedforward: &m,
		// No demand cap: the run is about the signals (its producers keep a
		// backlog anyway).
		DemandHeadroom: 0,
		MinRate:        3, MaxRate: c.MaxRate, SlewLimit: slew, TickPeriod: c.Tick, RateTTL: 6 * c.Tick,
		Sensing: loop.Sensing{
			Metric: metric.Query{Source: cwmetric.Name, Namespace: cpupub.DefaultNamespace, Metric: cpupub.DefaultMetric,
				Dimensions: map[string]string{cpupub.DefaultDimension: r.instance}, Statistic: "Average", Period: c.Tick},
			Stale: control.StalePolicy{Action: control.StaleHold, SafeRate: 3}, StaleAfter: 6 * c.Tick},
		Signals: []loop.Signal{{
			Name:     "lag",
			Controls: loop.Controls{Unit: "s", Setpoint: c.lagSetpoint, Kp: lagKp, Ki: lagKi, Kd: lagKd, DerivativeFilter: c.lagDF, AntiWindup: antiWindup(c.lagAW), DrainFeedforward: c.lagDrain},
			Sensing: loop.Sensing{Metric: metric.Query{Source: prommetric.Name, PromQL: lagPromQL(c.lagWindow)},
				Stale: control.StalePolicy{Action: control.StaleHold, SafeRate: 3}, StaleAfter: 6 * c.Tick},
		}},
	}
	if err := p.Validate(looptest.Sources()); err != nil {
		return p, fmt.Errorf("PARAMS: %w", err)
	}
	r.Logf("PARAMS: cpu setpoint %g %% (kp %.3g, ki %.3g, base %.1f %%), lag setpoint %g s (kp %.3g, ki %.3g, kd %.3g), slew_limit %g/tick; the model puts the CPU at %.1f %% at the replica's capacity",
		c.cpuSetpoint, cpuKp, cpuKi, m.Base, c.lagSetpoint, lagKp, lagKi, lagKd, slew, m.Output(capacity))
	return p, nil
}

// antiWindup is the -lag-anti-windup flag's scheme: "none" is PARAMS'
// empty anti_windup.
func antiWindup(flag string) control.AntiWindup {
	if flag == "none" {
		return control.AntiWindupNone
	}
	return control.AntiWindup(flag)
}

// putParams writes the loop's PARAMS item with the aws CLI, as an operator
// would.
func (r *run) putParams() error {
	p, err := r.params()
	if err != nil {
		return err
	}
	return e2ekit.PutParams(r.Ctx, r.table, p)
}

func (r *run) scenario() error {
	c := r.Cfg
	// The producers outpace the loop, so the rate is the loop's.
	stopProd := r.Produce(&r.orders, 2, 300)
	defer stopProd()
	t0 := r.now()
	r.Logf("producing for %v; cpu setpoint %g %%, lag setpoint %g s", c.duration, c.cpuSetpoint, c.lagSetpoint)
	for r.now() < t0+c.duration && r.Ctx.Err() == nil {
		r.Sleep(15 * time.Second)
		r.mu.Lock()
		var lim string
		var lag, rate float64
		if n := len(r.limiting); n > 0 {
			lim = r.limiting[n-1].sig
		}
		if n := len(r.lag); n > 0 {
			lag = r.lag[n-1].v
		}
		if n := len(r.rate); n > 0 {
			rate = r.rate[n-1].v
		}
		r.mu.Unlock()
		r.Logf("limiting %q, rate %.1f msg/s, lag %.1f s, %d sent", lim, rate, lag, r.orders.Sent.Load())
	}
	end := r.now()
	stopProd()
	r.analyse(end)
	r.writeTrace()

	// Drain at max_rate, then let the replica catch up.
	if err := e2ekit.Manual(r.Ctx, r.table, r.loopID, c.MaxRate); err != nil {
		return err
	}
	sent := int(r.orders.Sent.Load())
	r.Res.Sent = sent
	if !r.waitCount(r.primary, sent, 3*time.Minute) {
		r.Fail("the queue did not drain into the primary")
	}
	var err error
	if r.Res.Stored, r.Res.Duplicates, r.Res.Missing, err = e2ekit.OrderCounts(r.Ctx, r.primary, sent, nil); err != nil {
		return err
	}
	if !r.waitCount(r.replica, r.Res.Stored, 3*time.Minute) {
		r.Fail("the replica did not catch up")
	}
	if r.Res.ReplicaStored, _, _, err = e2ekit.OrderCounts(r.Ctx, r.replica, sent, nil); err != nil {
		return err
	}
	r.Res.Ticks, r.Res.TickErrors = int(r.Ticks.Load()), int(r.TickErrors.Load())
	r.check()
	return nil
}

// waitCount waits until db holds want orders of the run.
func (r *run) waitCount(db *sql.DB, want int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && r.Ctx.Err() == nil {
		var n int
		if err := db.QueryRowContext(r.Ctx, "SELECT COUNT(*) FROM orders WHERE order_id >= 0").Scan(&n); err == nil && n >= want {
			return true
		}
		r.Sleep(time.Second)
	}
	return false
}
