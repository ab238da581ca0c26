package loop

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// ReasonCode names what set a loop's rate at a tick: one code per loop per
// tick, the first that applies in the order of the constants below.
type ReasonCode string

// Reason codes, in the order they are tried.
const (
	// ReasonPaused: the operator paused the loop (PARAMS paused): RATE 0,
	// the mapping off, no controller runs.
	ReasonPaused ReasonCode = "paused"
	// ReasonManual: mode manual, the operator's manual_rate.
	ReasonManual ReasonCode = "manual"
	// ReasonExperiment: a guarded experiment offsets the setpoint.
	ReasonExperiment ReasonCode = "experiment"
	// ReasonStale: the limiting signal's metric was stale or missing and
	// its stale policy set the rate.
	ReasonStale ReasonCode = "stale"
	// ReasonResumed: the first fresh datapoint after a stale period; the
	// rate continues from what the stale policy left.
	ReasonResumed ReasonCode = "resumed"
	// ReasonCeiling: a datapoint at the signal's ceiling cut the rate.
	ReasonCeiling ReasonCode = "ceiling"
	// ReasonDemand: the consumers took clearly less than allowed; the rate
	// is held near what they took, or where it was (the integrator does
	// not wind up on what the destination did not receive).
	ReasonDemand ReasonCode = "demand"
	// ReasonMaxRate and ReasonMinRate: the rate is at a bound.
	ReasonMaxRate ReasonCode = "max_rate"
	ReasonMinRate ReasonCode = "min_rate"
	// ReasonSlew: the slew limit held the change back.
	ReasonSlew ReasonCode = "slew"
	// ReasonLimited: the limiting signal's controller set the rate from its
	// error against its setpoint.
	ReasonLimited ReasonCode = "limited"
	// ReasonDisabled and ReasonNoParams: the loop did not run.
	ReasonDisabled ReasonCode = "disabled"
	ReasonNoParams ReasonCode = "no-params"
)

// Reason is why a loop's rate was what it was at a tick: a code for
// machines (alarms, charts, EMF) and a sentence for the operator.
type Reason struct {
	Code ReasonCode `json:"code"`
	Text string     `json:"text"`
}

// reasonInput is what explain reads of a tick that ran: the parameters in
// force, the limiting signal's record, the output applied, the last
// tick's rate and whether an experiment is running.
type reasonInput struct {
	p          Params
	sig        SignalReport
	out        control.Output
	prevRate   float64 // the last tick's rate, when firstTick is false
	firstTick  bool
	processed  float64
	resumed    bool
	experiment *ExperimentState
	// depth is the queue's depth when depthKnown; processedKnown says
	// whether processed is.
	depth                      float64
	depthKnown, processedKnown bool
	// oldestAge is the age of the queue's oldest message when ageKnown.
	oldestAge time.Duration
	ageKnown  bool
}

// explain is the reason of a tick that ran (the tick's decision is made;
// explain only names it).
func explain(in reasonInput) Reason {
	p, sig, out := in.p, in.sig, in.out
	var r Reason
	switch {
	case p.Mode == ModeManual:
		r = Reason{ReasonManual, fmt.Sprintf("manual: rate set by hand to %s", fmtRate(p.ManualRate))}
		if out.Rate != p.ManualRate {
			r.Text += fmt.Sprintf(", %s now (bounds and slew limit)", fmtRate(out.Rate))
		}
	case in.experiment != nil && in.experiment.Status == ExperimentRunning:
		r = Reason{ReasonExperiment, fmt.Sprintf("experiment %s: setpoint %s in force (%s), rate %s",
			in.experiment.ID, fmtValue(sig.Setpoint, sig.Unit), fmtValue(in.experiment.Setpoint, sig.Unit)+" before", fmtRate(out.Rate))}
	case sig.Stale:
		r = Reason{ReasonStale, fmt.Sprintf("stale: %s: %s has no fresh datapoint, rate %s",
			p.StalePolicy().Action, sig.Name, fmtRate(out.Rate))}
	case in.resumed:
		r = Reason{ReasonResumed, fmt.Sprintf("resumed: %s fresh again at %s, continuing from %s", sig.Name, fmtValue(sig.Measured, sig.Unit), fmtRate(out.Rate))}
	case out.Cut:
		r = Reason{ReasonCeiling, fmt.Sprintf("ceiling: %s at %s, at or above its ceiling: rate cut to %s", sig.Name, fmtValue(sig.Measured, sig.Unit), fmtRate(out.Rate))}
	case out.DemandLimited || (out.ActualLimited && in.processedKnown && !out.Saturated):
		// Held near what was taken, or (the integrator frozen while the
		// consumers took clearly less than allowed) kept where it was.
		r = Reason{ReasonDemand, fmt.Sprintf("held by demand: consumers took %s of %s", fmtNum(in.processed), fmtRate(in.prevRate))}
	default:
		r = bounded(in)
	}
	if note := drainNote(in); note != "" {
		r.Text += "; " + note
	}
	if p.Mode == ModeShadow {
		r.Text += " (shadow: RATE not written)"
	}
	return r
}

// DrainMatters is how long a backlog must take to drain at the allowed
// rate before a tick's reason names it.
const DrainMatters = 10 * time.Minute

// drainNote is the drain forecast when it matters: "backlog 1.2e+06 drains
// in 3 h 10 m at the allowed 105 msg/s (4 h 10 m at the processed 80
// msg/s)", and when the oldest message expires first "; the oldest message
// (age 22 h) expires in 2 h, before the backlog drains: raise max_rate or
// the retention"; "" when the depth is unknown, or the backlog drains
// sooner than DrainMatters and before the oldest message expires.
func drainNote(in reasonInput) string {
	if !in.depthKnown || in.depth <= 0 {
		return ""
	}
	expiring, left := expiresFirst(in)
	var note string
	switch {
	case in.out.Rate > 0:
		at := time.Duration(in.depth / in.out.Rate * float64(time.Second))
		if at < DrainMatters && !expiring {
			return ""
		}
		note = fmt.Sprintf("backlog %s drains in %s at the allowed %s", fmtNum(in.depth), fmtDuration(at), fmtRate(in.out.Rate))
	case expiring:
		note = fmt.Sprintf("backlog %s does not drain at the allowed %s", fmtNum(in.depth), fmtRate(in.out.Rate))
	default:
		return ""
	}
	switch {
	case in.processedKnown && in.processed > 0:
		note += fmt.Sprintf(" (%s at the processed %s)", fmtDuration(time.Duration(in.depth/in.processed*float64(time.Second))), fmtRate(in.processed))
	case in.processedKnown:
		note += " (never at the processed 0 msg/s)"
	}
	if expiring {
		when := "in " + fmtDuration(left)
		if left <= 0 {
			when = "now"
		}
		note += fmt.Sprintf("; the oldest message (age %s) expires %s, before the backlog drains: raise max_rate or the retention",
			fmtDuration(in.oldestAge), when)
	}
	return note
}

// expiresFirst reports whether the queue's oldest message expires before
// the backlog drains at the allowed rate (its age plus the drain time
// exceed the retention, PARAMS depth_retention), and how long it has left;
// false when the age or the retention is unknown.
func expiresFirst(in reasonInput) (bool, time.Duration) {
	retention := in.p.DepthRetention
	if !in.ageKnown || retention <= 0 || !in.depthKnown || in.depth <= 0 {
		return false, 0
	}
	left := retention - in.oldestAge
	if in.out.Rate <= 0 {
		return true, left
	}
	return in.oldestAge+time.Duration(in.depth/in.out.Rate*float64(time.Second)) > retention, left
}

// fmtDuration is d in hours and minutes ("3 h 10 m", "2 h", "25 m"), days
// past two days.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.0f d", d.Hours()/24)
	case d >= time.Hour && int(d.Minutes())%60 == 0:
		return fmt.Sprintf("%d h", int(d.Hours()))
	case d >= time.Hour:
		return fmt.Sprintf("%d h %d m", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d m", int(d.Minutes()))
}

// bounded is the reason of an automatic tick that the bounds, the slew
// limit or the signal's own error explain.
func bounded(in reasonInput) Reason {
	p, sig, out := in.p, in.sig, in.out
	against := errorText(sig)
	switch {
	case out.Rate >= p.MaxRate:
		return Reason{ReasonMaxRate, fmt.Sprintf("max_rate: at %s; %s", fmtRate(p.MaxRate), against)}
	case out.Rate <= p.MinRate:
		return Reason{ReasonMinRate, fmt.Sprintf("min_rate: at %s; %s", fmtRate(p.MinRate), against)}
	case out.Saturated && p.SlewLimit > 0:
		from := "from " + fmtRate(in.prevRate)
		if in.firstTick {
			from = "first tick"
		}
		return Reason{ReasonSlew, fmt.Sprintf("slew limit: %s to %s, at most %s per tick; %s",
			from, fmtRate(out.Rate), fmtNum(p.SlewLimit), against)}
	}
	if !math.IsNaN(sig.Measured) && sig.Measured < sig.Setpoint-0.01*math.Abs(sig.Setpoint) {
		return Reason{ReasonLimited, "set by " + against} // below its setpoint: room to rise
	}
	return Reason{ReasonLimited, "limited by " + against}
}

// errorText is the signal against its setpoint: "cpu: 72.1 % above its 70
// % setpoint".
func errorText(sig SignalReport) string {
	if math.IsNaN(sig.Measured) {
		return fmt.Sprintf("%s: no datapoint yet, setpoint %s", sig.Name, fmtValue(sig.Setpoint, sig.Unit))
	}
	// Within 1 % of the setpoint is at it.
	rel, band := "at", 0.01*math.Abs(sig.Setpoint)
	switch d := sig.Measured - sig.Setpoint; {
	case d > band:
		rel = "above"
	case d < -band:
		rel = "below"
	}
	return fmt.Sprintf("%s: %s %s its %s setpoint", sig.Name, fmtValue(sig.Measured, sig.Unit), rel, fmtValue(sig.Setpoint, sig.Unit))
}

// fmtValue is v in unit, to three significant figures.
func fmtValue(v float64, unit string) string {
	if unit == "" {
		return fmtNum(v)
	}
	return fmtNum(v) + " " + unit
}

// fmtRate is a rate in messages/s, to three significant figures.
func fmtRate(v float64) string { return fmtNum(v) + " msg/s" }

// fmtNum is v to three significant figures (whole numbers from 100 up),
// without an exponent below a million.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || a >= 1e6:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case a == 0:
		return "0"
	}
	x, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// idleReason is the reason of a loop that did not run: disabled, or
// without valid parameters (why is the refusal, in r.ParamsReason).
func idleReason(outcome Outcome, refusal string) *Reason {
	if outcome == OutcomeDisabled {
		return &Reason{ReasonDisabled, "disabled: PARAMS enabled is false"}
	}
	return &Reason{ReasonNoParams, "no-params: no valid PARAMS, the loop does not run: " + refusal}
}

// explain records in st and r the queue's figures (depth.go) and the
// reason of the tick computed into st, whose Rate is still the last tick's.
func (w *due) explain(st *State, out control.Output, r *Report) {
	r.Depth, r.DepthKnown = w.depth, w.depthKnown
	r.OldestAge, r.ExpiresIn = w.forecast()
	st.OldestAge, st.ExpiresIn = r.OldestAge, r.ExpiresIn
	in := reasonFor(w.params, st, out, r)
	in.oldestAge, in.ageKnown = w.oldestAge, w.ageKnown
	st.Reason = explain(in)
	r.Reason = &st.Reason
}

// reasonFor is explain's input from a tick computed into st (whose Rate is
// still the last tick's) and r: the limiting signal's record is r's.
func reasonFor(p Params, st *State, out control.Output, r *Report) reasonInput {
	in := reasonInput{p: p, out: out, prevRate: st.Rate, firstTick: st.Version == 0, processed: r.Processed,
		resumed: r.Resumed, experiment: st.Experiment, depth: r.Depth, depthKnown: r.DepthKnown, processedKnown: r.ProcessedKnown}
	for i, s := range r.Signals {
		if i == 0 || s.Name == r.Limiting {
			in.sig = s
		}
	}
	in.sig.Stale = in.sig.Stale || r.Stale
	return in
}
