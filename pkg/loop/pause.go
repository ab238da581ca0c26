package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// A pause stops consumption for as long as it lasts, and loses nothing.
// While PARAMS paused is true, every tick writes RATE 0 (the workers stop
// receiving and keep their leases), turns the loop's event source mapping
// off (a Lambda consumer then receives nothing, so no message counts a
// receive toward the queue's maxReceiveCount, and a Kafka mapping commits
// nothing), and runs no controller: no integrator winds up against a
// destination that takes nothing. The first tick after the pause turns the
// mapping on again and restarts every signal's controller as on a first
// tick (from the model's rate, through the setpoint filter), so the resume
// is bumpless. See docs/controller.md, "Pause and resume".

// AttrPaused is the PARAMS attribute that pauses a loop (`sluice pause`).
const AttrPaused = "paused"

// MappingKind is the event source of a loop's mapping (esm_kind).
type MappingKind string

// Mapping kinds. An SQS mapping is sized (MaximumConcurrency) and
// switched; a Kafka mapping (MSK or self-managed) has no
// MaximumConcurrency and is only switched off and on.
const (
	MappingSQS   MappingKind = "sqs"
	MappingKafka MappingKind = "kafka"
)

// scaled reports whether the tick sizes the mapping's MaximumConcurrency.
func (c MappingConfig) scaled() bool { return c.Kind != MappingKafka }

// MappingSwitch turns an event source mapping off and on. A
// Ticker.Mappings that is one too serves pauses; pkg/adapter/lambdaesm is
// both.
type MappingSwitch interface {
	// SetMappingEnabled sets the mapping's Enabled.
	SetMappingEnabled(ctx context.Context, uuid string, enabled bool) error
}

// checkPause refuses a paused loop that is also disabled: a disabled loop's
// consumers fall back to their safe rate, which would end the pause
// without a resume.
func (p Params) checkPause(fail failFunc) {
	if p.Paused && !p.Enabled {
		fail(AttrPaused, "the loop is paused and enabled is false: resume it first (paused false); enabled false hands the consumers to their safe rate, which a pause must not do")
	}
}

// pausedTick is the tick of a paused loop: the datapoint is recorded, no
// controller runs, RATE is 0 (written in every mode: a pause is the
// operator's act).
func (w *due) pausedTick(st *State, prevVersion int64, now time.Time, r *Report) Commit {
	p := w.params
	if s := w.samples[0]; s.Found {
		r.Measured, r.MetricAt = s.Value, s.Time
		st.MetricAt, st.Measured = s.Time, s.Value
	}
	if !st.Paused {
		st.PausedSince = now
	}
	st.Paused = true
	st.Version, st.Schema, st.TickAt = prevVersion+1, StateSchema, now
	st.Setpoint, st.Rate, st.Mode, st.Terms = p.Setpoint, 0, p.Mode, control.Output{}
	st.Params, st.ParamsFingerprint = &p, w.fp
	r.Tick, r.Mode, r.Setpoint, r.Rate, r.AtMin = st.Version, p.Mode, p.Setpoint, 0, true
	r.Paused, r.PausedSince, r.RateWritten = true, st.PausedSince, true
	st.Reason = Reason{ReasonPaused, "paused since " + st.PausedSince.UTC().Format(time.RFC3339) + ": RATE 0 until sluice resume"}
	r.Reason = &st.Reason
	if w.status != nil {
		w.status.Tick = st.Version
	}
	rate := &protocol.Rate{Loop: st.Loop, PerSecond: 0, WrittenAt: now, ExpiresAt: now.Add(p.RateTTL), Tick: st.Version,
		Inner: p.innerSettings(true)}
	return Commit{PrevVersion: prevVersion, State: *st, Status: w.status, Rate: rate}
}

// resume clears a pause from st at the first tick after it: every signal's
// controller starts over (control.Controller's first update: the plant at
// steady state at the measurement, the output at the model's rate there),
// and the consumers' counts start a new baseline, since what they stored
// during the pause says nothing about demand. It returns the STATE the
// demand baseline is read from.
func resume(st *State, prev *State, r *Report) *State {
	if !st.Paused {
		return prev
	}
	for i := range st.Signals {
		st.Signals[i].Controller = control.State{}
	}
	st.Paused, st.PausedSince = false, time.Time{}
	r.Resumed = true
	cp := *prev
	cp.Demand, cp.TickAt = Demand{}, time.Time{}
	return &cp
}

// switchMapping turns the loop's mapping off while it is paused and on
// again after, when STATE says it is not already so. A failure is recorded
// in m and r and retried at the next tick (the pause acts at once, not at
// the update interval); RATE is 0 meanwhile, so the consumers hand back
// what the mapping still delivers.
func (t *Ticker) switchMapping(ctx context.Context, p MappingConfig, paused bool, m *MappingState, r *MappingReport, now time.Time) {
	r.Disabled = m.Disabled
	if m.Disabled == paused {
		return
	}
	sw, ok := t.Mappings.(MappingSwitch)
	if !ok {
		err := fmt.Errorf("event source mapping %s: the controller cannot turn mappings off and on (Ticker.Mappings is not a MappingSwitch)", p.UUID)
		m.Error, m.ErrorAt, r.Err = err.Error(), now, err.Error()
		return
	}
	if err := sw.SetMappingEnabled(ctx, p.UUID, !paused); err != nil {
		err = fmt.Errorf("set Enabled to %v: %w", !paused, err)
		m.Error, m.ErrorAt, r.Err = err.Error(), now, err.Error()
		return
	}
	m.Disabled, m.SwitchedAt, r.Disabled, r.Switched = paused, now, paused, true
	m.Error, m.ErrorAt = "", time.Time{}
}
