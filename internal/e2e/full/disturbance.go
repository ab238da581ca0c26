package main

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
)

// The disturbance is load from elsewhere on MariaDB: the load generator's
// aggregate queries, open loop. Its CPU cost per query is measured on this
// machine before the loop starts (probeLoad), not assumed from the
// messages' model, and its rate is sized from the loop's own steady CPU
// (the mean over the settled phase, above the idle CPU the probe
// measured) so that the controller must cut the consumers' rate by
// disturbanceShare to hold the setpoint, whatever else loads the machine. `sluice why` must see that cut (internal/why: a third of the
// mean rate); the loop's min_rate (3 msg/s, about a third of its settled
// rate) keeps it from cutting more.
const (
	disturbanceShare = 0.6
	// loadWorkers are the generator's connections: enough that a query
	// slowed by a busy machine does not hold its rate back (6 ran 85 % of
	// the rate asked with a core taken by a busy loop).
	loadWorkers = 12
	// probeFor is how long the probe runs the generator (after 2 s to
	// start), probeIdle how long it measures the idle CPU before.
	probeFor, probeIdle = 10 * time.Second, 5 * time.Second
)

// disturbanceResult is the disturbance as measured: the probe's idle CPU
// and the CPU one query per second costs, the size planned from the
// settled phase's CPU, the queries per second planned and run, and the
// allowed rate (the loop's history) over the settled phase and over the
// disturbance's second half, and the share the controller cut.
type disturbanceResult struct {
	IdleCPU       float64 `json:"idle_cpu"`
	ProbeQPS      float64 `json:"probe_qps"`
	QueryCost     float64 `json:"cpu_per_query_per_s"`
	PlannedPP     float64 `json:"planned_pp"`
	QPS           float64 `json:"qps"`
	AchievedQPS   float64 `json:"achieved_qps"`
	RateBefore    float64 `json:"rate_before"`
	RateDisturbed float64 `json:"rate_disturbed"`
	RateCut       float64 `json:"rate_cut"`
}

// probeLoad measures MariaDB's idle CPU and the CPU the load generator
// adds per query per second, at about the rate the disturbance will run.
// It runs before the consumers start; when the probe shows no cost (the
// other tenants' load swamped it) the messages' model stands in, and the
// log says so.
func (r *run) probeLoad() error {
	c := r.Cfg
	m := r.Res.Model
	d := &r.Res.Disturb
	q := math.Max(1, disturbanceShare*(c.setpoint-m.Base)/m.Gain)
	cpu := func(s func() error) (float64, error) {
		s0, err := r.sampler.Sample()
		if err != nil {
			return 0, err
		}
		if err := s(); err != nil {
			return 0, err
		}
		s1, err := r.sampler.Sample()
		if err != nil {
			return 0, err
		}
		return r.sampler.Utilization(s0, s1)
	}
	idle, err := cpu(func() error { r.Sleep(probeIdle); return nil })
	if err != nil {
		return fmt.Errorf("probe the idle CPU: %w", err)
	}
	gen := &dbload.LoadGenerator{DB: r.db, Rate: q, ScanRows: c.ScanRows, DataRows: c.DataRows, Workers: loadWorkers}
	if err := gen.Start(r.Ctx); err != nil {
		return err
	}
	defer gen.Stop()
	r.Sleep(2 * time.Second)
	n0, _ := gen.Queries()
	start := time.Now()
	busy, err := cpu(func() error { r.Sleep(probeFor); return nil })
	n1, _ := gen.Queries()
	if err != nil {
		return fmt.Errorf("probe the load generator's CPU: %w", err)
	}
	achieved := float64(n1-n0) / time.Since(start).Seconds()
	d.IdleCPU, d.ProbeQPS = e2ekit.Round(idle, 2), e2ekit.Round(achieved, 2)
	d.QueryCost = (busy - idle) / achieved
	if !(d.QueryCost > 0) || math.IsInf(d.QueryCost, 0) {
		r.Logf("load probe: %.1f queries/s gave %.1f %% over %.1f %% idle: no cost measured; the messages' model (%.2f points per msg/s) stands in",
			achieved, busy, idle, m.Gain)
		d.QueryCost = m.Gain
	}
	d.QueryCost = e2ekit.Round(d.QueryCost, 3)
	r.Logf("load probe: idle CPU %.1f %%; %.1f queries/s (asked %.1f) -> %.1f %%: %.2f points per query/s (the messages: %.2f per msg/s)",
		idle, achieved, q, busy, d.QueryCost, m.Gain)
	return nil
}

// disturbanceGenerator is the load generator sized from the settled
// phase's mean CPU before: it leaves the messages 1-disturbanceShare of
// the CPU above idle they used then, so the controller must cut their rate
// by disturbanceShare to hold the setpoint. A loop held below its setpoint
// (the consumers took less than allowed) first has the room up to it
// filled: sized on the CPU alone, the disturbance would vanish into it.
func (r *run) disturbanceGenerator(before float64) *dbload.LoadGenerator {
	c := r.Cfg
	d := &r.Res.Disturb
	room := c.setpoint - d.IdleCPU
	used := math.Min(before, c.setpoint) - d.IdleCPU
	if math.IsNaN(used) || used <= 0 {
		used = room // no settled CPU to size from: the setpoint's
	}
	d.PlannedPP = e2ekit.Round(room-(1-disturbanceShare)*used, 2)
	d.QPS = e2ekit.Round(d.PlannedPP/d.QueryCost, 2)
	return &dbload.LoadGenerator{DB: r.db, Rate: d.QPS, ScanRows: c.ScanRows, DataRows: c.DataRows, Workers: loadWorkers}
}
