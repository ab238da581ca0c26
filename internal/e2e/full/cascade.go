package main

// The cascade scenario (make e2e-cascade): the same plant, functions and
// harness as the full scenario, run twice in one invocation under the same
// external load burst, once with the consumers' inner loop on (PARAMS
// inner_loop, which RATE carries to them) and once with it off. The loop is
// tuned from the documented model (no step test) and ticks on MariaDB's CPU.
// Each run: the loop settles; with the inner loop on, every consumer's lease
// must show a learned latency reference; the mean CPU over a phase is the
// steady CPU; then another client's aggregate queries add burst-points of
// CPU for the burst's length, sized from the steady phase's CPU per message;
// the seconds above setpoint + 5 count from the burst's onset to half a
// phase after its end. At the end the queue is drained and every order of
// each run is checked stored exactly once.

import (
	"context"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// cascadeConfig are the cascade scenario's own flags.
type cascadeConfig struct {
	burst       time.Duration
	points      float64
	tolerance   float64
	trip        float64
	assertRatio bool
}

func (c *cascadeConfig) declare() {
	flag.DurationVar(&c.burst, "burst", 15*time.Second, "cascade: how long the external load lasts")
	flag.Float64Var(&c.points, "burst-points", 25, "cascade: the CPU points the external load adds")
	flag.Float64Var(&c.tolerance, "inner-tolerance", loop.DefaultInnerTolerance,
		"cascade: PARAMS inner_tolerance (the share's steadiness band, the latency's rise that cuts, the allowed rate's rise that drops the reference)")
	flag.Float64Var(&c.trip, "inner-trip", 0,
		"cascade: PARAMS inner_trip, the latency's rise that cuts when set (0: the tolerance)")
	flag.BoolVar(&c.assertRatio, "assert-ratio", false,
		"cascade: fail unless the run with the inner loop spends at least 5 times fewer seconds above setpoint + 5 than the run without (the long run)")
}

// CascadeRun is one run of the cascade scenario.
type CascadeRun struct {
	Inner bool `json:"inner"`
	// SecondsAbove counts the seconds from the burst's onset to half a
	// phase after its end at which the CPU, averaged over the metric's
	// period, is above setpoint + 5 (secondsAbove).
	SecondsAbove int `json:"seconds_above_sp5_after_burst"`
	// SteadyCPU is the mean CPU over the phase before the burst; BurstCPU
	// over the burst; MaxCPU the highest mean over the metric's period
	// after the onset.
	SteadyCPU float64 `json:"steady_cpu"`
	BurstCPU  float64 `json:"mean_cpu_in_burst"`
	MaxCPU    float64 `json:"max_cpu_after_burst"`
	// RateBefore is RATE at the onset; Withheld the messages the inner
	// loops held back below their shares from the onset on (the leases).
	RateBefore float64 `json:"rate_before_burst"`
	Withheld   int64   `json:"withheld"`
	// WithheldBefore is what they held back from the run's start to the
	// onset: cuts in the steady phase, which the outer loop answers with
	// a higher rate.
	WithheldBefore int64 `json:"withheld_before_burst"`
	// ReferenceMS is the consumers' mean learned latency reference per
	// message at the onset, PeakLatencyMS their highest mean latency in the
	// burst (the leases; 0 without the inner loop).
	ReferenceMS   float64 `json:"reference_ms"`
	PeakLatencyMS float64 `json:"peak_latency_ms"`
	// LearnedAtPeak is how many live leases carried a reference when
	// their mean latency peaked (of Live): a consumer without one cannot
	// cut. SettleS is how long the run waited, after its wait, for the CPU's
	// mean over a phase to come within 2.5 points of the setpoint
	// (waitSettled).
	LearnedAtPeak int     `json:"learned_at_peak"`
	LiveAtPeak    int     `json:"live_at_peak"`
	SettleS       float64 `json:"settle_s"`
	// Orders [first, end) are this run's.
	First, End int `json:"-"`
	Stored     int `json:"stored"`
	Missing    int `json:"missing"`
	Duplicates int `json:"duplicates"`
}

// CascadeResult is the cascade scenario's JSON last line. Ratio is the
// seconds above setpoint + 5 without the inner loop over those with it (at
// least 1 second).
type CascadeResult struct {
	Setpoint     float64 `json:"setpoint"`
	TickS        float64 `json:"tick_s"`
	MetricDelayS float64 `json:"metric_delay_s"`
	// Tolerance and Trip are the run's PARAMS inner_tolerance and
	// inner_trip (0: the tolerance).
	Tolerance     float64    `json:"inner_tolerance"`
	Trip          float64    `json:"inner_trip"`
	Cores         float64    `json:"cores"`
	ScanRows      int        `json:"scan_rows"`
	BurstS        float64    `json:"burst_s"`
	BurstQPS      float64    `json:"burst_qps"`
	Gain          float64    `json:"gain_measured"`
	On            CascadeRun `json:"on"`
	Off           CascadeRun `json:"off"`
	Ratio         float64    `json:"ratio"`
	RatioAsserted bool       `json:"ratio_asserted"`
	Ticks         int        `json:"ticks"`
	TickErrors    int        `json:"tick_errors"`
	Stalls        int64      `json:"stalls"`
	verdict.Verdict
}

// cascadeMain runs the cascade scenario and returns the exit code.
func (r *run) cascadeMain(c config) int {
	r.Name, r.Start, r.Cfg = "e2e-cascade", time.Now(), c
	timeout := 12*c.phase + 2*c.cascade.burst + 6*time.Minute
	r.Main(timeout, r.setup, r.cascadeScenario)
	return r.Report(&r.cas, &r.cas.Verdict)
}

// cascadeCalibrate scales the workload to the machine before the loop is
// tuned from the documented model: the load probe measures the CPU per
// query per second at about the rate the model gives for the setpoint (the
// same aggregate as a message's), and when that is more than 1.5 times
// away from the model's gain the rows each message scans are scaled by
// their ratio and the probe runs again (up to three times: a probe that
// saturated the database measured too little). A database on one CPU of its own
// (-mariadb-cpus) costs about twice the documented two CPUs' figure.
func (r *run) cascadeCalibrate() error {
	r.Res.Model.Gain, r.Res.Model.Base = documentedModel.Gain, documentedModel.Base
	if err := r.probeLoad(); err != nil {
		return err
	}
	// A probe that saturated the database measured too little: up to
	// three rounds.
	for range 3 {
		g := r.Res.Disturb.QueryCost
		if g <= documentedModel.Gain*1.5 && g >= documentedModel.Gain/1.5 {
			return nil
		}
		c := &r.Cfg
		scan := max(1000, int(float64(c.ScanRows)*documentedModel.Gain/g))
		r.Logf("the database takes %.2f points of CPU per query/s, the model %.2f per msg/s: %d rows scanned per message instead of %d; probe again",
			g, documentedModel.Gain, scan, c.ScanRows)
		if err := dbload.SetScanRows(r.Ctx, r.db, c.DataRows, scan); err != nil {
			return err
		}
		c.ScanRows = scan
		// The last probe's queries still running would count as idle.
		r.Sleep(probeIdle)
		if err := r.probeLoad(); err != nil {
			return err
		}
	}
	return nil
}

// cascadeParams are the PARAMS of the loop tuned from the documented model
// (no step test: the run is short), with the inner loop on at the run's
// tolerance (-inner-tolerance) and trip (-inner-trip) and the default
// reaction time.
func (r *run) cascadeParams() (loop.Params, error) {
	p, err := r.paramsFor(documentedModel)
	p.Inner = &loop.InnerParams{Tolerance: r.Cfg.cascade.tolerance, Trip: r.Cfg.cascade.trip, ReactionTime: loop.DefaultInnerReactionTime}
	return p, err
}

func (r *run) cascadeScenario() error {
	c := r.Cfg
	res := &r.cas
	res.Setpoint, res.TickS, res.BurstS, res.RatioAsserted = c.setpoint, c.Tick.Seconds(), c.cascade.burst.Seconds(), c.cascade.assertRatio
	res.MetricDelayS, res.Cores, res.ScanRows = c.metricDelay.Seconds(), r.sampler.Cores, c.ScanRows
	res.Tolerance, res.Trip = c.cascade.tolerance, c.cascade.trip
	stopProd := r.Produce(&r.orders, 2, 200)
	defer stopProd()
	res.On.Inner = true
	on, err := r.cascadeRun(&res.On, 2*c.phase)
	if err != nil {
		return err
	}
	// The inner loop off at the burst's end: its second half phase, in
	// which the first run's seconds above setpoint + 5 still count, is the
	// second run's wait for RATE to carry it off.
	r.Logf("inner loop off: PARAMS inner_loop false")
	if err := e2ekit.AWS(r.Ctx, "dynamodb", "update-item", "--table-name", r.table, "--key", e2ekit.Key(r.loopID, "PARAMS"),
		"--update-expression", "SET inner_loop = :f REMOVE inner_tolerance, inner_trip, inner_reaction_time",
		"--expression-attribute-values", `{":f":{"BOOL":false}}`); err != nil {
		return err
	}
	off, err := r.cascadeRun(&res.Off, c.phase+c.phase/2)
	if err != nil {
		return err
	}
	r.Sleep(off.end + c.phase/2 - r.now())
	stopProd()
	for _, b := range []burstRun{on, off} {
		if err := r.afterBurst(b); err != nil {
			return err
		}
	}
	if err := e2ekit.Manual(r.Ctx, r.table, r.loopID, c.MaxRate); err != nil {
		return err
	}
	if !r.drain(3 * time.Minute) {
		r.Fail("the queue did not drain")
	}
	res.Off.End = int(r.orders.Sent.Load())
	res.Ticks, res.TickErrors, res.Stalls = int(r.Ticks.Load()), int(r.TickErrors.Load()), r.stalls.Load()
	res.Ratio = e2ekit.Round(float64(res.Off.SecondsAbove)/math.Max(float64(res.On.SecondsAbove), 1), 2)
	return r.cascadeCheck()
}

// burstRun is one run's burst: its onset and end (the run's time), and what
// the leases had withheld at the onset.
type burstRun struct {
	cr         *CascadeRun
	onset, end time.Duration
	withheld   int64
}

// cascadeRun is one run up to its burst's end: the wait for the consumers
// to show the inner loop on (a learned reference in every lease) or off
// (RATE and the leases without it), and for at least wait since the run
// began; the steady phase (the phase before the onset); the burst.
func (r *run) cascadeRun(cr *CascadeRun, wait time.Duration) (burstRun, error) {
	c := r.Cfg
	begin := r.now()
	cr.First = int(r.orders.Sent.Load())
	start, _, err := r.innerLeases()
	if err != nil {
		return burstRun{}, err
	}
	ref, err := r.waitInner(cr.Inner, 6*c.phase+6*loop.InnerSettleTicks*c.Tick)
	if err != nil {
		return burstRun{}, err
	}
	cr.ReferenceMS = e2ekit.Round(ref.Seconds()*1000, 2)
	r.sleepUntil(max(r.now(), begin+wait))
	cr.SettleS = e2ekit.Round(r.waitSettled(8*c.phase).Seconds(), 1)
	b := burstRun{cr: cr, onset: r.now()}
	steady, _ := r.meanCPU(b.onset-c.phase, b.onset)
	cr.SteadyCPU = e2ekit.Round(steady, 2)
	rate, err := ddbstore.New(r.ddb, r.table).ReadRate(r.Ctx, r.loopID)
	if err != nil {
		return b, fmt.Errorf("read RATE: %w", err)
	}
	cr.RateBefore = e2ekit.Round(rate.PerSecond, 2)
	if r.cas.BurstQPS == 0 {
		r.sizeBurst(steady, rate.PerSecond)
	}
	leases, _, err := r.innerLeases()
	if err != nil {
		return b, err
	}
	b.withheld = leases.withheld
	cr.WithheldBefore = leases.withheld - start.withheld
	gen := &dbload.LoadGenerator{DB: r.db, Rate: r.cas.BurstQPS, ScanRows: c.ScanRows, DataRows: c.DataRows, Workers: 4}
	r.Logf("burst on (inner loop %v): %.1f queries/s for %v; steady CPU %.1f %%, RATE %.1f msg/s, reference %.2f ms",
		cr.Inner, r.cas.BurstQPS, c.cascade.burst, steady, rate.PerSecond, cr.ReferenceMS)
	if err := gen.Start(r.Ctx); err != nil {
		return b, err
	}
	cr.PeakLatencyMS, cr.LearnedAtPeak, cr.LiveAtPeak = r.peakLatency(b.onset + c.cascade.burst)
	gen.Stop()
	b.end = r.now()
	return b, nil
}

// afterBurst fills b's run in: the seconds above setpoint + 5 from the
// onset to half a phase after the end, the CPU in the burst, the messages
// withheld since the onset.
func (r *run) afterBurst(b burstRun) error {
	c, cr := r.Cfg, b.cr
	leases, _, err := r.innerLeases()
	if err != nil {
		return err
	}
	cr.Withheld = leases.withheld - b.withheld
	burst, _ := r.meanCPU(b.onset, b.end)
	cr.BurstCPU = e2ekit.Round(burst, 2)
	cr.SecondsAbove, cr.MaxCPU = r.secondsAbove(b.onset, b.end+c.phase/2, c.setpoint+5)
	r.Logf("burst with the inner loop %v: %d s above setpoint + 5, max %.1f %%, mean %.1f %% in the burst, %d messages withheld",
		cr.Inner, cr.SecondsAbove, cr.MaxCPU, burst, cr.Withheld)
	return nil
}

// sizeBurst sizes the external load to add the configured CPU points, by
// the CPU per query per second the load probe measured (what the
// generator adds); else by the CPU per message of the steady phase (the
// same aggregate per query as per message, but RATE is not all taken: in
// one run the steady phase gave 1.08 points per msg/s and the probe 1.54
// per query/s, and a burst sized for 20 points added about 28); the
// documented model's when that is implausible.
func (r *run) sizeBurst(steady, rate float64) {
	g := r.Res.Disturb.QueryCost
	if !(g > 0) {
		g = (steady - documentedModel.Base) / rate
	}
	if math.IsNaN(g) || g < 0.1 || g > 10 {
		g = documentedModel.Gain
	}
	r.cas.Gain = e2ekit.Round(g, 3)
	r.cas.BurstQPS = e2ekit.Round(r.Cfg.cascade.points/g, 2)
}

// leaseSum is what the run's leases say of the inner loops: the messages
// they withheld in all (every lease, lapsed ones too), and over the live
// leases the mean latency and reference and how many carry a reference.
type leaseSum struct {
	withheld           int64
	live, learned      int
	latency, reference time.Duration
}

// innerLeases reads the loop's leases.
func (r *run) innerLeases() (leaseSum, []protocol.Peer, error) {
	peers, err := ddbstore.New(r.ddb, r.table).LoopPeers(r.Ctx, r.loopID)
	if err != nil {
		return leaseSum{}, nil, fmt.Errorf("read the leases: %w", err)
	}
	var s leaseSum
	now := time.Now()
	for _, p := range peers {
		s.withheld += p.Withheld
		if !p.Live(now) {
			continue
		}
		s.live++
		s.latency += p.InnerLatency
		if p.InnerReference > 0 {
			s.learned++
			s.reference += p.InnerReference
		}
	}
	if s.live > 0 {
		s.latency /= time.Duration(s.live)
	}
	if s.learned > 0 {
		s.reference /= time.Duration(s.learned)
	}
	return s, peers, nil
}

// waitInner waits until the consumers show the inner loop on (every live
// lease carries a learned reference; the mean is returned) or off (RATE
// carries no inner settings and no live lease a latency).
func (r *run) waitInner(on bool, within time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(within)
	for n := 0; time.Now().Before(deadline) && r.Ctx.Err() == nil; {
		s, _, err := r.innerLeases()
		if err != nil {
			return 0, err
		}
		if on && s.live > 0 && s.learned == s.live {
			r.Logf("every consumer learned its latency reference: %d leases, mean %v", s.live, s.reference)
			return s.reference, nil
		}
		if !on && s.live > 0 && s.latency == 0 {
			rate, err := ddbstore.New(r.ddb, r.table).ReadRate(r.Ctx, r.loopID)
			if err == nil && rate.Inner == nil {
				return 0, nil
			}
		}
		if n++; n%10 == 0 {
			r.Logf("waiting for the inner loop %v: %d live leases, %d with a reference", on, s.live, s.learned)
		}
		r.Sleep(time.Second)
	}
	if on {
		return 0, fmt.Errorf("the consumers' inner loops learned no latency reference within %v", within)
	}
	return 0, fmt.Errorf("the consumers' inner loops did not stop within %v of inner_loop false", within)
}

// peakLatency samples the leases every second until the run's time until,
// logs what they say, and returns their highest mean latency (ms) with how
// many of the live leases carried a reference then, of how many.
func (r *run) peakLatency(until time.Duration) (ms float64, learned, live int) {
	peak := 0.0
	for r.now() < until && r.Ctx.Err() == nil {
		if s, peers, err := r.innerLeases(); err == nil {
			ms := s.latency.Seconds() * 1000
			fleet, n := protocol.FleetLatency(peers, time.Now())
			r.Logf("in the burst: %d live leases, %d with a reference (mean %.1f ms), mean latency %.1f ms, fleet ratio %.2f over %d, %d withheld in all",
				s.live, s.learned, s.reference.Seconds()*1000, ms, fleet, n, s.withheld)
			if ms > peak {
				peak, learned, live = ms, s.learned, s.live
			}
		}
		r.Sleep(min(time.Second, until-r.now()))
	}
	return e2ekit.Round(peak, 2), learned, live
}

// waitSettled waits, at most within, until the CPU's mean over the last
// phase is within 2.5 points of the setpoint (the checks want 5), and
// returns how long it waited: the run after a burst starts from a loop
// that has recovered, not from the burst's aftermath.
func (r *run) waitSettled(within time.Duration) time.Duration {
	c, start := r.Cfg, r.now()
	for r.now()-start < within && r.Ctx.Err() == nil {
		if m, n := r.meanCPU(r.now()-c.phase, r.now()); n > 0 && math.Abs(m-c.setpoint) <= 2.5 {
			break
		}
		r.Sleep(time.Second)
	}
	return r.now() - start
}

// secondsAbove counts the seconds in [from, to) at which the mean CPU over
// the metric's period ending then (-tick: what a datapoint averages) is
// above limit, and returns the highest such mean. The 1-s samples of a
// real database are too noisy to count one by one: batches of stores
// arrive in lumps.
func (r *run) secondsAbove(from, to time.Duration, limit float64) (int, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.Cfg.Tick
	n, peak := 0, 0.0
	for i, p := range r.cpu {
		if p.t < from || p.t >= to {
			continue
		}
		var sum float64
		k := 0
		for j := i; j >= 0 && r.cpu[j].t > p.t-w; j-- {
			sum += r.cpu[j].cpu
			k++
		}
		mean := sum / float64(k)
		peak = math.Max(peak, mean)
		if mean > limit {
			n++
		}
	}
	return n, e2ekit.Round(peak, 2)
}

// cascadeCheck counts each run's orders and checks the runs: nothing lost
// or applied twice, the steady CPU within 5 points of the setpoint, the
// inner loop cutting in its run and not in the other; with -assert-ratio,
// 5 times fewer seconds above setpoint + 5 with it.
func (r *run) cascadeCheck() error {
	c := r.Cfg
	res := &r.cas
	res.On.End = res.Off.First
	skip := r.poisonSeqs()
	for _, cr := range []*CascadeRun{&res.On, &res.Off} {
		var err error
		cr.Stored, cr.Duplicates, cr.Missing, err = e2ekit.OrderCountsIn(context.WithoutCancel(r.Ctx), r.db, cr.First, cr.End, skip)
		if err != nil {
			return err
		}
		name := map[bool]string{true: "with the inner loop", false: "without the inner loop"}[cr.Inner]
		if cr.Missing > 0 || cr.Duplicates > 0 {
			r.Fail("%s: orders [%d, %d): %d missing, %d duplicates", name, cr.First, cr.End, cr.Missing, cr.Duplicates)
		}
		if math.Abs(cr.SteadyCPU-c.setpoint) > 5 {
			r.Fail("%s: steady CPU %.1f %%: not within 5 points of the setpoint %g", name, cr.SteadyCPU, c.setpoint)
		}
	}
	if res.On.Withheld <= 0 {
		r.Fail("with the inner loop: the consumers withheld nothing under the burst (no cut)")
	}
	if res.Off.Withheld != 0 {
		r.Fail("without the inner loop: the consumers withheld %d messages", res.Off.Withheld)
	}
	if c.cascade.assertRatio && res.Off.SecondsAbove < 5*max(res.On.SecondsAbove, 1) {
		r.Fail("%d s above setpoint + 5 with the inner loop against %d without: want at least 5 times fewer",
			res.On.SecondsAbove, res.Off.SecondsAbove)
	}
	return nil
}
