package loop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/drift"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// State is the STATE item of a loop: what the controller remembers between
// invocations. Version increases by one with every applied tick; a write is
// conditional on the version read, so two invocations never both apply the
// same tick.
type State struct {
	// Loop is the loop id.
	Loop string `json:"loop"`
	// Version is the number of ticks applied; 0 before the first.
	Version int64 `json:"version"`
	// Schema is the item's schema (StateSchema when this controller wrote
	// it; 0 for schema 1, before schemas were recorded).
	Schema int `json:"schema,omitempty"`
	// TickAt is when the last tick was applied.
	TickAt time.Time `json:"tick_at"`
	// MetricAt is the timestamp of the newest datapoint seen at the last
	// tick (zero when none was found).
	MetricAt time.Time `json:"metric_at"`
	// Measured is that datapoint's value.
	Measured float64 `json:"measured"`
	// Setpoint is the setpoint in force at the last tick.
	Setpoint float64 `json:"setpoint"`
	// Rate is the rate computed at the last tick (written to RATE unless
	// the loop is in shadow mode).
	Rate float64 `json:"rate"`
	// Mode is the mode in force at the last tick.
	Mode Mode `json:"mode"`
	// Stale is true when the last tick found the metric stale or missing;
	// StaleSince is when that started.
	Stale      bool      `json:"stale"`
	StaleSince time.Time `json:"stale_since"`
	// Terms are the controller's terms at the last tick.
	Terms control.Output `json:"terms"`
	// Params are the last valid parameters: they stay in force while an
	// edit is refused. Nil when no valid PARAMS was ever seen. Encoded in
	// the PARAMS item's shape (Params.MarshalJSON).
	Params *Params `json:"params,omitempty"`
	// ParamsFingerprint identifies the PARAMS item last checked.
	ParamsFingerprint string `json:"params_fingerprint"`
	// Balance is the balancer's memory for a loop with nodes (node weights
	// by node name); zero for a loop without.
	Balance balance.State `json:"balance,omitzero"`
	// Drift is how well the loop's model predicts its measured signal, and
	// model_drift when the residual says the plant moved (pkg/drift).
	Drift drift.State `json:"drift,omitzero"`
	// Experiment is the progress of the loop's last guarded experiment;
	// nil when none ran (experiment.go).
	Experiment *ExperimentState `json:"experiment,omitempty"`
	// Demand is what the consumers reported at the last tick: the
	// processed rate and each instance's count (peers.go).
	Demand Demand `json:"demand,omitzero"`
	// Mapping is the event source mapping's concurrency as last set, the
	// last update and its error, and the consumers' batch counts, for a
	// loop that owns one (mapping.go).
	Mapping MappingState `json:"mapping,omitzero"`
	// Paused is true while the loop is paused, since PausedSince
	// (pause.go).
	Paused      bool      `json:"paused,omitempty"`
	PausedSince time.Time `json:"paused_since,omitzero"`
	// Signals is every signal's record, in Params.SignalNames order, the
	// first signal (the top-level attributes) first: for every loop, one
	// signal or several (signals.go). Limiting names the signal whose
	// controller's output was the rate at the last tick: the outcome of
	// the selection between several signals (override control); empty for
	// a loop with one signal, which has no selection. The fields above
	// are the loop's: its Stale is the limiting signal's.
	Limiting string        `json:"limiting,omitempty"`
	Signals  []SignalState `json:"signals,omitempty"`
	// Reason is what set the rate at the last tick (reason.go); zero
	// before schema 4.
	Reason Reason `json:"reason,omitzero"`
	// OldestAge and ExpiresIn are the last tick's age of the oldest
	// message in the loop's depth_queue and the time until it expires
	// (depth_retention); zero when unknown (Report's).
	OldestAge time.Duration `json:"oldest_age,omitempty"`
	ExpiresIn time.Duration `json:"expires_in,omitempty"`
}

// SignalState is one signal's record in a loop's STATE.
type SignalState struct {
	// Name is the signal's name.
	Name string `json:"name"`
	// Controller is the signal's PID controller memory.
	Controller control.State `json:"controller,omitzero"`
	// MetricAt and Measured are the newest datapoint seen (zero when none
	// was ever found); Setpoint and Unit the signal's setpoint and unit.
	MetricAt time.Time `json:"metric_at,omitzero"`
	Measured float64   `json:"measured"`
	Setpoint float64   `json:"setpoint"`
	Unit     string    `json:"unit,omitempty"`
	// Terms is the signal's controller's own output: Terms.Rate is what it
	// asked for, before the lowest was chosen.
	Terms control.Output `json:"terms"`
	// Tracking is true when another signal limited the rate and this
	// signal's controller tracked it (external reset feedback).
	Tracking bool `json:"tracking"`
	// Stale is true when the signal's metric was stale or missing;
	// StaleSince is when that started.
	Stale      bool      `json:"stale"`
	StaleSince time.Time `json:"stale_since,omitzero"`
	// Drain is a lag's measure of the replica's pace (drain_feedforward);
	// nil without.
	Drain *Drain `json:"drain,omitempty"`
}

// Status values of a PARAMS_STATUS item.
const (
	StatusApplied = "applied"
	StatusRefused = "refused"
)

// ParamsStatus is the PARAMS_STATUS item: the controller's verdict on the
// latest edit of PARAMS, where the operator looks (`sluice params get`).
type ParamsStatus struct {
	// Loop is the loop id.
	Loop string `json:"loop"`
	// Status is applied or refused.
	Status string `json:"status"`
	// Reason says why an edit was refused: each attribute and what is
	// wrong with it. Empty when applied.
	Reason string `json:"reason,omitempty"`
	// InForce says which parameters the loop runs on after a refusal.
	InForce string `json:"in_force,omitempty"`
	// Fingerprint identifies the PARAMS item checked (see Fingerprint).
	Fingerprint string `json:"fingerprint"`
	// CheckedAt is when the controller checked it; Tick is the STATE
	// version written with this status.
	CheckedAt time.Time `json:"checked_at"`
	Tick      int64     `json:"tick"`
}

// Snapshot is what a store holds for one loop: its raw PARAMS attributes
// (nil when there is no PARAMS item), its STATE (nil before the first tick)
// and its PARAMS_STATUS (nil when none).
type Snapshot struct {
	Loop   string
	Params map[string]any
	State  *State
	Status *ParamsStatus
	// Err is set when this loop's items could not be read or decoded (a
	// corrupt STATE item): the tick reports this loop as failed, writes
	// nothing for it, and ticks the other loops.
	Err error
	// Peers are the consumers' leases on the loop (peers.go), live or
	// lapsed less than PeerRetention ago; nil when no consumer reports.
	Peers []protocol.Peer
}

// Commit is the outcome of one loop's tick, written at once: STATE
// (conditional on PrevVersion), RATE (unless nil) and PARAMS_STATUS (unless
// nil).
type Commit struct {
	// PrevVersion is the STATE version the tick read; 0 when there was no
	// STATE. State.Version must be PrevVersion + 1.
	PrevVersion int64
	State       State
	Rate        *protocol.Rate
	Status      *ParamsStatus
}

// Validate reports why c is not a commit a TickStore can write: it names no
// loop, or State.Version is not PrevVersion + 1. A TickStore checks it in
// CommitTick before writing anything; its error does not wrap ErrConflict.
func (c Commit) Validate() error {
	if c.State.Loop == "" {
		return errors.New("commit names no loop: State.Loop must hold the loop id")
	}
	if c.State.Version != c.PrevVersion+1 {
		return fmt.Errorf("loop %q: new version %d does not follow %d", c.State.Loop, c.State.Version, c.PrevVersion)
	}
	return nil
}

// ErrConflict is returned by CommitTick when STATE's version is no longer
// the one the tick read: another invocation applied the tick first.
var ErrConflict = errors.New("STATE version changed: another invocation applied this tick")

// TickStore is what a controller tick needs from storage: every loop's
// items in one read, and an atomic conditional write per loop.
type TickStore interface {
	// LoadLoops returns a snapshot of every loop that has any item, with
	// STATE read consistently.
	LoadLoops(ctx context.Context) ([]Snapshot, error)
	// CommitTick writes c atomically if STATE's version is still
	// c.PrevVersion, and returns an error wrapping ErrConflict otherwise.
	CommitTick(ctx context.Context, c Commit) error
}

// Clone returns a deep copy of s: nothing it refers to is shared with s.
func (s State) Clone() State {
	s.Balance.Nodes = maps.Clone(s.Balance.Nodes)
	s.Drift = s.Drift.Clone()
	if s.Experiment != nil {
		x := *s.Experiment
		s.Experiment = &x
	}
	s.Demand.Stored = maps.Clone(s.Demand.Stored)
	s.Demand.ReportedAt = maps.Clone(s.Demand.ReportedAt)
	s.Mapping = s.Mapping.Clone()
	s.Signals = slices.Clone(s.Signals)
	for i := range s.Signals {
		c := &s.Signals[i].Controller
		c.Reference, c.Applied = slices.Clone(c.Reference), slices.Clone(c.Applied)
		s.Signals[i].Drain = s.Signals[i].Drain.Clone()
	}
	if s.Params != nil {
		p := s.Params.Clone()
		s.Params = &p
	}
	return s
}

// Clone returns a deep copy of p.
func (p Params) Clone() Params {
	p.Metric.Dimensions = maps.Clone(p.Metric.Dimensions)
	p.Nodes = slices.Clone(p.Nodes)
	if p.Balance != nil {
		c := *p.Balance
		p.Balance = &c
	}
	if p.Feedforward != nil {
		m := *p.Feedforward
		p.Feedforward = &m
	}
	if p.Mapping != nil {
		m := *p.Mapping
		p.Mapping = &m
	}
	if p.Signals != nil {
		p.Signals = slices.Clone(p.Signals)
		for i := range p.Signals {
			s := &p.Signals[i]
			s.Metric.Dimensions = maps.Clone(s.Metric.Dimensions)
			if s.Feedforward != nil {
				m := *s.Feedforward
				s.Feedforward = &m
			}
		}
	}
	return p
}
