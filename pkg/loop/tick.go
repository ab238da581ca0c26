package loop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Outcome says what a tick did with one loop.
type Outcome string

// Outcomes of a loop's tick.
const (
	// OutcomeApplied: STATE (and RATE unless in shadow mode) written.
	OutcomeApplied Outcome = "applied"
	// OutcomeLost: another invocation applied this tick first; nothing was
	// written.
	OutcomeLost Outcome = "lost"
	// OutcomeNotDue: the loop's last tick is more recent than its tick
	// period minus a slack for the schedule's jitter (see dueSlack): an
	// overlapping invocation, or a loop whose period is longer than the
	// schedule's; nothing was written.
	OutcomeNotDue Outcome = "not-due"
	// OutcomeDisabled: the loop is disabled.
	OutcomeDisabled Outcome = "disabled"
	// OutcomeNoParams: the loop has no valid PARAMS and never had any; its
	// refusal is recorded, no rate is written.
	OutcomeNoParams Outcome = "no-params"
	// OutcomeError: the tick failed for this loop (see Report.Err).
	OutcomeError Outcome = "error"
)

// Report is what one tick did with one loop: for the log line, the metrics
// and the tests. Its fields are grouped by concern; the groups are embedded,
// so that a reader writes r.Rate, and the JSON is flat.
type Report struct {
	Loop    string  `json:"loop"`
	Outcome Outcome `json:"outcome"`
	// Tick is the STATE version written (or read, when nothing was written).
	Tick int64 `json:"tick"`
	Mode Mode  `json:"mode,omitempty"`
	MeasurementReport
	OutputReport
	DriftReport
	ParamsReport
	NodesReport
	DemandReport
	// Mapping is what the tick did with the loop's event source mapping;
	// nil for a loop that owns none (mapping.go).
	Mapping *MappingReport `json:"mapping,omitempty"`
	// Member is what a member of a destination was given (share.go); nil
	// for a loop with its own controllers.
	Member *MemberReport `json:"member,omitempty"`
	// Signals reports each signal of every loop, the first one (the
	// top-level attributes) first; Limiting names the signal whose
	// controller set the rate, the selection's outcome for a loop with
	// several signals ("" for one; signals.go).
	Limiting string         `json:"limiting,omitempty"`
	Signals  []SignalReport `json:"signals,omitempty"`
	// Reason is what set the rate at this tick, a code and a sentence
	// (reason.go); nil when the loop did not run.
	Reason *Reason `json:"reason,omitempty"`
	// Err is set with OutcomeError.
	Err error `json:"-"`
}

// MeasurementReport is the measurement a tick's rate comes from: the
// limiting signal's (the only one's for a loop with one signal).
type MeasurementReport struct {
	// Setpoint and Measured are the setpoint and the newest datapoint
	// (NaN when none); MetricAt is its timestamp and MetricAge its age
	// after its period ended.
	Setpoint  float64       `json:"setpoint"`
	Measured  float64       `json:"measured"`
	MetricAt  time.Time     `json:"metric_at,omitzero"`
	MetricAge time.Duration `json:"metric_age"`
	// Stale is true when the metric was stale, missing or invalid and the
	// stale policy decided the rate; Resumed is true on the first tick with
	// a fresh metric after that.
	Stale   bool `json:"stale"`
	Resumed bool `json:"resumed,omitempty"`
}

// OutputReport is the rate a tick computed and the controller's terms.
type OutputReport struct {
	// Rate is the computed rate; RateWritten is false in shadow mode.
	Rate        float64 `json:"rate"`
	RateWritten bool    `json:"rate_written"`
	// P, I, D and FF are the controller's terms; Saturated is true when the
	// bounds or the slew limit cut the output.
	P         float64 `json:"p"`
	I         float64 `json:"i"`
	D         float64 `json:"d"`
	FF        float64 `json:"ff"`
	Saturated bool    `json:"saturated"`
	// AtMin is true when the rate is at the loop's minimum rate (an alarm
	// watches loops pinned there).
	AtMin bool `json:"at_min"`
	// Paused is true while an operator paused the loop, since PausedSince
	// (pause.go): the rate is 0 and no controller ran.
	Paused      bool      `json:"paused,omitempty"`
	PausedSince time.Time `json:"paused_since,omitzero"`
}

// DriftReport is the verdict on the loop's model (DriftState).
type DriftReport struct {
	// ModelDrift is set while STATE says the plant moved away from the
	// loop's model; DriftGainRatio is the plant's gain over the model's as
	// last estimated (0 before a verdict). See drift.State.
	ModelDrift     bool    `json:"model_drift,omitempty"`
	DriftGainRatio float64 `json:"drift_gain_ratio,omitempty"`
	// DriftReason is what moved (drift.State.Reason) while ModelDrift is
	// set; DriftDeadTime the plant's dead time as last estimated, and
	// DriftDeadTimeEvidence the dead-time test's last figure.
	DriftReason           string        `json:"drift_reason,omitempty"`
	DriftDeadTime         time.Duration `json:"drift_dead_time,omitempty"`
	DriftDeadTimeEvidence float64       `json:"drift_dead_time_evidence,omitempty"`
}

// ParamsReport is the verdict on an edit of PARAMS that this tick checked.
type ParamsReport struct {
	// ParamsStatus is applied or refused when this tick checked a new edit
	// of PARAMS; ParamsReason is the refusal's reason.
	ParamsStatus string `json:"params_status,omitempty"`
	ParamsReason string `json:"params_reason,omitempty"`
	// ParamsUpdatedBy and ParamsChanges are who made that edit and what it
	// changed, as the editor recorded them in PARAMS (updated_by,
	// updated_changes); "" when not recorded.
	ParamsUpdatedBy string `json:"params_updated_by,omitempty"`
	ParamsChanges   string `json:"params_changes,omitempty"`
}

// NodesReport is the balancer's outcome for a loop with nodes.
type NodesReport struct {
	// Weights are the node weights written to RATE, keyed by endpoint, and
	// Nodes the utilization of each node with a fresh metric, keyed by node
	// name; both nil for a loop without nodes. NodesMissing names the nodes
	// whose metric was missing or stale (they kept their weight).
	Weights      map[string]float64 `json:"weights,omitempty"`
	Nodes        map[string]float64 `json:"nodes,omitempty"`
	NodesMissing []string           `json:"nodes_missing,omitempty"`
}

// DemandReport is what the consumers took and what waits for them.
type DemandReport struct {
	// Processed is the rate the consumers reported storing since the
	// previous tick, messages/s, when ProcessedKnown; LivePeers counts
	// their live leases; DemandLimited is true when the controller held
	// the rate near what was taken (demand.go).
	Processed      float64 `json:"processed"`
	ProcessedKnown bool    `json:"processed_known"`
	LivePeers      int     `json:"live_peers"`
	DemandLimited  bool    `json:"demand_limited"`
	// Withheld is the rate the consumers' inner loops withheld below their
	// shares since the previous tick, messages/s (Demand.WithheldRate);
	// InnerLatency and InnerReference the mean store latency per message
	// and learned reference of the live leases that carry them (zero:
	// none), which the dashboard charts (inner.go).
	Withheld       float64       `json:"withheld,omitempty"`
	InnerLatency   time.Duration `json:"inner_latency,omitempty"`
	InnerReference time.Duration `json:"inner_reference,omitempty"`
	// Depth is the queue's depth (messages visible, AWS/SQS) when
	// DepthKnown: PARAMS depth_queue names the queue.
	Depth      float64 `json:"depth"`
	DepthKnown bool    `json:"depth_known"`
	// OldestAge is the age of the queue's oldest message (AWS/SQS
	// ApproximateAgeOfOldestMessage), zero when unknown; ExpiresIn the
	// time until it expires, with PARAMS depth_retention (zero when
	// unknown or due now).
	OldestAge time.Duration `json:"oldest_age,omitempty"`
	ExpiresIn time.Duration `json:"expires_in,omitempty"`
}

// Ticker runs one controller tick for every loop in a store: it reads all
// metrics in batches (one ReadMetrics call per source), runs each due loop's
// controller and commits each loop's STATE and RATE conditionally on the
// STATE version it read.
type Ticker struct {
	// Store holds the loops.
	Store TickStore
	// Sources are the metric sources a loop's PARAMS may name (the first
	// is the default): their rules decode and check each loop's metric.
	Sources metric.Sources
	// Metrics maps each source's name to its reader; a loop whose source
	// has no reader is treated as having no metric (its stale policy
	// applies).
	Metrics map[string]metric.Reader
	// Now is the clock.
	Now func() time.Time
	// Concurrency bounds the commits in flight (default 16).
	Concurrency int
	// Mappings sets the concurrency of the event source mappings that
	// loops own (PARAMS esm_uuid); nil: such a loop records the failure
	// and its consumers keep pacing alone.
	Mappings MappingScaler
}

// due is a loop whose tick runs now.
type due struct {
	snap   Snapshot
	params Params
	fp     string
	status *ParamsStatus
	// samples are the signals' samples, one per signal in
	// params.SignalNames order, the first signal's first.
	samples []metric.Sample
	// nodes are the samples of a loop with nodes, one per node in
	// params.Nodes order (the first signal's sample is then computed from
	// them).
	nodes []metric.Sample
	// depth is the queue's depth when depthKnown (depth.go).
	depth      float64
	depthKnown bool
	// oldestAge is the age of the queue's oldest message when ageKnown
	// (depth.go).
	oldestAge time.Duration
	ageKnown  bool
	// fn are a foreign consumer's figures (foreign.go).
	fn FunctionFigures
	// report is the index of the loop's report.
	report int
	// members are the members of a destination that tick with it, and
	// demand a member's consumers' figure at this tick (share.go); tickAt
	// is the tick's time.
	members []*due
	demand  Demand
	tickAt  time.Time
}

// Tick runs one tick for every loop and returns one report per loop, sorted
// by loop id. The error is set only when the store could not be read; the
// failure of one loop is in its report.
func (t *Ticker) Tick(ctx context.Context) ([]Report, error) {
	now := t.Now()
	snaps, err := t.Store.LoadLoops(ctx)
	if err != nil {
		return nil, fmt.Errorf("tick: load loops: %w", err)
	}
	slices.SortFunc(snaps, func(a, b Snapshot) int { return strings.Compare(a.Loop, b.Loop) })
	reports := make([]Report, len(snaps))
	var work []*due
	var statusOnly []statusCommit
	problems := membershipProblems(snaps)
	for i, snap := range snaps {
		w, c := triage(snap, t.Sources, now, &reports[i], problems[snap.Loop])
		switch {
		case w != nil:
			w.report = i
			work = append(work, w)
		case c != nil:
			statusOnly = append(statusOnly, statusCommit{report: i, commit: *c})
		}
	}
	work, orphans := groupMembers(work) // members tick with their destination (share.go)
	for _, m := range orphans {
		if c := orphanCommit(m, &reports[m.report]); c != nil {
			statusOnly = append(statusOnly, statusCommit{report: m.report, commit: *c})
		}
	}
	t.readMetrics(ctx, work, now)
	t.readDepths(ctx, withMembers(work), now)    // the dashboard's queue depth (depth.go)
	t.readFunctions(ctx, withMembers(work), now) // a foreign consumer's figures (foreign.go)
	t.commitAll(ctx, work, statusOnly, reports, now)
	return reports, nil
}

// statusCommit records the verdict on a loop's PARAMS without running it.
type statusCommit struct {
	report int
	commit Commit
}

// triage decides what a loop does this tick: run (a due item), record the
// verdict on its PARAMS only (a commit), or nothing; r says why.
func triage(snap Snapshot, sources metric.Sources, now time.Time, r *Report, problem *FieldError) (*due, *Commit) {
	r.Loop, r.Measured = snap.Loop, math.NaN()
	if snap.State != nil {
		r.Tick = snap.State.Version
	}
	if snap.Err != nil {
		// Nothing is written: the item stays as it is for the operator to
		// repair or delete (deleting STATE restarts the loop bumplessly
		// from its feedforward estimate).
		r.Outcome, r.Err = OutcomeError, snap.Err
		return nil, nil
	}
	if snap.State != nil {
		if err := upgradeState(snap.State); err != nil {
			// Refused, not ticked: this controller would drop what a
			// newer one keeps in STATE.
			r.Outcome, r.Err = OutcomeError, err
			return nil, nil
		}
	}
	if snap.Params == nil {
		r.Outcome = OutcomeNoParams
		r.ParamsStatus, r.ParamsReason = StatusRefused, ErrParamsMissing.Error()
		r.Reason = idleReason(r.Outcome, r.ParamsReason)
		return nil, nil
	}
	inForce, fp, status := paramsInForce(snap, sources, now, r, problem)
	prev := snap.State
	if inForce == nil || !inForce.Enabled {
		return nil, idle(snap, inForce, fp, status, r)
	}
	if inForce.Member == nil && prev != nil && !prev.TickAt.IsZero() && now.Sub(prev.TickAt) < inForce.TickPeriod-dueSlack(inForce.TickPeriod) {
		r.Outcome = OutcomeNotDue
		return nil, nil
	}
	return &due{snap: snap, params: *inForce, fp: fp, status: status}, nil
}

// paramsInForce decodes a loop's PARAMS: the parameters in force (the new
// ones, or the last valid ones when the edit is refused; nil when there are
// none), the edit's fingerprint, and the verdict to record when the edit is
// new (nil when it was checked before).
func paramsInForce(snap Snapshot, sources metric.Sources, now time.Time, r *Report, problem *FieldError) (*Params, string, *ParamsStatus) {
	p, perr := DecodeParams(snap.Loop, snap.Params, sources)
	fp := Fingerprint(snap.Params)
	if problem != nil {
		// A member whose destination is wrong among the loops (member.go):
		// refused, and checked again once the other loops change.
		fp += "-" + Fingerprint(map[string]any{"membership": problem.Reason})
		if perr == nil {
			perr = &ParamsError{Loop: snap.Loop, Fields: []FieldError{*problem}}
		}
	}
	prev := snap.State
	var inForce *Params
	if perr == nil {
		inForce = &p
	} else if prev != nil && prev.Params != nil {
		inForce = prev.Params
	}
	if prev != nil && prev.ParamsFingerprint == fp {
		return inForce, fp, nil
	}
	status := &ParamsStatus{Loop: snap.Loop, Status: StatusApplied, Fingerprint: fp, CheckedAt: now}
	if perr != nil {
		status.Status, status.Reason = StatusRefused, refusal(perr)
		status.InForce = "no valid parameters: the loop does not run"
		if inForce != nil {
			status.InForce = fmt.Sprintf("last valid parameters (checked at tick %d)", prev.Version)
		}
	}
	r.ParamsStatus, r.ParamsReason = status.Status, status.Reason
	r.ParamsUpdatedBy, _ = snap.Params["updated_by"].(string)
	r.ParamsChanges, _ = snap.Params["updated_changes"].(string)
	return inForce, fp, status
}

// idle is a loop that does not run (no valid parameters, or disabled): when
// its PARAMS were edited, the verdict is recorded (with the fingerprint, so
// that it is recorded once) without running the loop.
func idle(snap Snapshot, inForce *Params, fp string, status *ParamsStatus, r *Report) *Commit {
	r.Outcome = OutcomeNoParams
	if inForce != nil {
		r.Outcome = OutcomeDisabled
	}
	r.Reason = idleReason(r.Outcome, r.ParamsReason)
	if status == nil {
		return nil
	}
	prev := snap.State
	st := State{Loop: snap.Loop, Params: inForce, ParamsFingerprint: fp}
	if prev != nil {
		st = *prev
		st.Params, st.ParamsFingerprint = inForce, fp
	}
	st.Version, st.Schema = r.Tick+1, StateSchema
	status.Tick = st.Version
	return &Commit{PrevVersion: r.Tick, State: st, Status: status}
}

// commitAll computes each due loop's tick (in order) and commits it, and the
// status-only commits, at most Concurrency at a time.
func (t *Ticker) commitAll(ctx context.Context, work []*due, statusOnly []statusCommit, reports []Report, now time.Time) {
	var g errgroup.Group
	g.SetLimit(cmp.Or(max(t.Concurrency, 0), 16))
	for _, w := range work {
		r := &reports[w.report]
		c := t.compute(w, now, r)
		g.Go(func() error {
			t.scaleMapping(ctx, w, &c, r) // the event source mapping, the coarse actuator (mapping.go)
			t.commit(ctx, c, r)
			return nil
		})
		for _, m := range w.shareRate(c, now, reports) { // a destination's members (share.go)
			g.Go(func() error {
				t.scaleMapping(ctx, m.w, &m.c, m.r)
				t.commit(ctx, m.c, m.r)
				return nil
			})
		}
	}
	for _, s := range statusOnly {
		r := &reports[s.report]
		g.Go(func() error {
			outcome := r.Outcome
			t.commit(ctx, s.commit, r)
			if r.Outcome == OutcomeApplied {
				r.Outcome = outcome
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines report into their Report, never an error
}

// dueSlack is how much earlier than its tick period a loop may tick again:
// half the period, at most 20 s, so that a schedule's jitter does not skip a
// tick while an overlapping invocation finds the loop not due.
func dueSlack(period time.Duration) time.Duration {
	return min(period/2, 20*time.Second)
}

func refusal(err error) string {
	var pe *ParamsError
	if errors.As(err, &pe) {
		return pe.Reason()
	}
	return err.Error()
}

// compute runs one loop's controller and returns what to commit.
func (t *Ticker) compute(w *due, now time.Time, r *Report) Commit {
	p := w.params
	prev := w.snap.State
	var st State
	if prev != nil {
		st = *prev
	}
	st.Loop = w.snap.Loop
	prevVersion := st.Version
	if p.Paused {
		return w.pausedTick(&st, prevVersion, now, r) // pause.go
	}
	if prev != nil {
		prev = resume(&st, prev, r) // the first tick after a pause starts over
	}
	// The first signal's controller; its memory is its record's, as every
	// signal's (tickSignals).
	ctrl := control.Controller{Config: p.ControlConfig()}
	if len(st.Signals) > 0 {
		ctrl.State = st.Signals[0].Controller
	}

	// The controller's clock follows the time really elapsed, so that the
	// derivative and the delay-aware prediction see the true time between
	// datapoints after a missed schedule; a datapoint after a gap is
	// integrated over at most three tick periods (Params.ControlConfig), as
	// the stale policy and the balancer count the interval.
	elapsed := p.TickPeriod
	if prev != nil && !prev.TickAt.IsZero() {
		elapsed = max(now.Sub(prev.TickAt), 0)
	}
	dt := min(elapsed, 3*p.TickPeriod)

	tc := &tickCtx{p: p, prev: prev, st: &st, now: now, dt: dt, r: r}
	var weights map[string]float64
	st.Balance = balance.State{}
	if len(p.Nodes) > 0 {
		w.samples[0], weights = tc.balance(w, ctrl.Config)
	}
	in, fresh := measure(w, &st, ctrl.Config, now, elapsed, r)
	// The processed rate the consumers reported: an idle queue is not a
	// slow destination (demand.go).
	st.Demand = observeDemand(w.snap, prev, now, &in, r)
	w.foreignDemand(prev, &st.Demand, &in, r) // a consumer without leases: its queue's deletes (foreign.go)
	w.tickAt = now
	w.membersDemand(&in)                       // a destination's members (share.go)
	out := w.tickSignals(tc, &ctrl, in, fresh) // every signal alike (signals_tick.go)
	if err := w.samples[0].Err; err != nil {
		r.Err = err
	}
	st.Drift = trackDrift(st.Drift, p, ctrl.State, in, out.ActualLimited, fresh, now)
	r.ModelDrift, r.DriftGainRatio, r.DriftReason = st.Drift.ModelDrift, st.Drift.GainRatio, st.Drift.Reason
	r.DriftDeadTime, r.DriftDeadTimeEvidence = st.Drift.DeadTime, st.Drift.DeadTimeEvidence
	st.Demand.Limited, r.DemandLimited = out.DemandLimited, out.DemandLimited
	w.explain(&st, out, r) // names the decision made above (reason.go)
	return w.record(&st, out, prevVersion, now, weights, r)
}

// tickCtx is what every step of one loop's tick reads and writes: the
// parameters in force, the STATE read (nil before the first tick), the
// STATE being written, the tick's time and interval (dt: the elapsed time,
// at most three tick periods), and the loop's report.
type tickCtx struct {
	p    Params
	prev *State
	st   *State
	now  time.Time
	dt   time.Duration
	r    *Report
}

// measure turns the first signal's sample into its controller's input: its value,
// how old it is, and whether it is fresh (found, valid, not older than
// StaleAfter). It records the datapoint in st and r.
func measure(w *due, st *State, cc control.Config, now time.Time, elapsed time.Duration, r *Report) (control.Input, bool) {
	s := w.samples[0]
	in, fresh, age := sampleInput(&w.params, s, cc, now, elapsed)
	if s.Found {
		r.Measured, r.MetricAt, r.MetricAge = s.Value, s.Time, age
		st.MetricAt, st.Measured = s.Time, s.Value
	}
	return in, fresh
}

// update runs the controller of a signal that sets the rate alone (a loop
// with one signal: no selection): on a stale metric the signal's stale
// policy sets the rate (and the controller records what was really sent:
// the delay-aware integrator predicts from it when data return); the first
// fresh tick after a stale period resumes bumplessly from the rate the
// policy left. sig is the signal's record, whose stale record it keeps.
func (tc *tickCtx) update(ctrl *control.Controller, sig *SignalState, in control.Input, fresh bool) control.Output {
	p, now, dt, r := tc.p, tc.now, tc.dt, tc.r
	prevRate := tc.st.Rate // still the last tick's
	var out control.Output
	switch {
	case !fresh:
		in.Measurement = math.NaN()
		out = ctrl.Update(in)
		if p.Mode != ModeManual {
			if !sig.Stale {
				sig.StaleSince = now
			}
			// Stale for this tick's interval at least: with no grace the
			// policy acts at the first stale tick.
			ctrl.Override(p.StalePolicy().Apply(out.Rate, now.Sub(sig.StaleSince)+dt, dt))
			out.Rate = ctrl.State.Output
		}
		sig.Stale = true
		r.Stale = true
	case sig.Stale && p.Mode != ModeManual && ctrl.State.Init:
		// Bumpless resume: this tick continues from the rate the stale
		// policy left, and the integrator tracks it (control's manual
		// tracking), so the next tick carries on from there.
		ctrl.Config.Mode = control.ModeManual
		ctrl.Config.ManualRate = prevRate
		out = ctrl.Update(in)
		sig.Stale, sig.StaleSince = false, time.Time{}
		r.Resumed = true
	default:
		out = ctrl.Update(in)
		sig.Stale, sig.StaleSince = false, time.Time{}
	}
	return out
}

// record writes the tick's outcome into the new STATE and the report, and
// returns the commit: STATE, the verdict on an edit, and RATE unless the
// loop is in shadow mode.
func (w *due) record(st *State, out control.Output, prevVersion int64, now time.Time, weights map[string]float64, r *Report) Commit {
	p := w.params
	st.Version, st.Schema = prevVersion+1, StateSchema
	st.TickAt = now
	st.Setpoint = p.Setpoint + st.Experiment.offset(p) // the setpoint in force
	st.Rate = out.Rate
	st.Mode = p.Mode
	st.Terms = out
	st.Params = &p
	st.ParamsFingerprint = w.fp

	r.Tick = st.Version
	r.Mode, r.Setpoint, r.Rate = p.Mode, st.Setpoint, out.Rate
	r.P, r.I, r.D, r.FF, r.Saturated = out.P, out.I, out.D, out.FF, out.Saturated
	r.AtMin = out.Rate <= p.MinRate

	c := Commit{PrevVersion: prevVersion, State: *st, Status: w.status}
	if w.status != nil {
		w.status.Tick = st.Version
	}
	if p.Mode != ModeShadow {
		c.Rate = &protocol.Rate{Loop: st.Loop, PerSecond: out.Rate, WrittenAt: now, ExpiresAt: now.Add(p.RateTTL), Tick: st.Version, Weights: weights,
			Inner: p.innerSettings(innerUnsettled(r.Stale, r.Measured, st.Setpoint))}
		r.RateWritten = true
	}
	return c
}

func (t *Ticker) commit(ctx context.Context, c Commit, r *Report) {
	err := t.Store.CommitTick(ctx, c)
	switch {
	case err == nil:
		r.Outcome = OutcomeApplied
	case errors.Is(err, ErrConflict):
		r.Outcome, r.RateWritten, r.Tick = OutcomeLost, false, c.PrevVersion
		r.ParamsStatus, r.ParamsReason, r.ParamsUpdatedBy, r.ParamsChanges = "", "", "", ""
	default:
		r.Outcome, r.RateWritten, r.Err = OutcomeError, false, err
	}
}

// balance runs the balancer of a loop with nodes: every node's fresh
// utilization (missing, failed, invalid or stale ones are NaN: the node keeps
// its weight) updates st.Balance, and the returned sample is what the rate
// loop regulates: the maximum (or the mean) of the fresh utilizations, timed
// by the oldest of them; not found when no node has a fresh metric. The
// weights are keyed by the nodes' endpoints.
func (tc *tickCtx) balance(w *due, cc control.Config) (metric.Sample, map[string]float64) {
	p, now, r := w.params, tc.now, tc.r
	util := make(map[string]float64, len(p.Nodes))
	var agg metric.Sample
	var sum float64
	var fresh int
	var errs []error
	for i, n := range p.Nodes {
		s := w.nodes[i]
		ok := s.Err == nil && s.Found && cc.ValidMeasurement(s.Value) && max(now.Sub(s.Time.Add(p.Metric.Period)), 0) <= p.StaleAfter
		if s.Err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, s.Err))
		}
		if !ok {
			util[n.Name] = math.NaN()
			r.NodesMissing = append(r.NodesMissing, n.Name)
			continue
		}
		util[n.Name] = s.Value
		if r.Nodes == nil {
			r.Nodes = make(map[string]float64, len(p.Nodes))
		}
		r.Nodes[n.Name] = s.Value
		sum += s.Value
		if fresh == 0 || s.Time.Before(agg.Time) {
			agg.Time = s.Time
		}
		if fresh == 0 || s.Value > agg.Value {
			agg.Value = s.Value
		}
		fresh++
	}
	if fresh > 0 {
		agg.Found = true
		if p.Regulation() == RegulateMean {
			agg.Value = sum / float64(fresh)
		}
	} else if len(errs) > 0 {
		agg.Err = errors.Join(errs...)
	}

	bc := balance.Controller{Config: p.BalanceConfig()}
	if tc.prev != nil {
		bc.State = tc.prev.Balance
		bc.State.Nodes = maps.Clone(tc.prev.Balance.Nodes)
	}
	bc.Update(util, tc.dt)
	tc.st.Balance = bc.State
	weights := make(map[string]float64, len(p.Nodes))
	for _, n := range p.Nodes {
		weights[n.Endpoint] = bc.State.Nodes[n.Name].Weight
	}
	r.Weights = weights
	return agg, weights
}
