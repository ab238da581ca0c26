package loop

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// The coarse actuator. A loop whose consumers are an SQS Lambda
// may own its event source mapping (PARAMS esm_uuid): the tick then sets the
// mapping's ScalingConfig.MaximumConcurrency from the allowed rate and the
// time a batch takes, so that the Lambda instances do not spend their billed
// time asleep in the pacer. The pacer in each instance still holds the rate
// exactly (the fine actuator): the mapping only decides how many instances
// share it. See docs/controller.md, "The event source mapping".

// Bounds of an SQS event source mapping's MaximumConcurrency (AWS Lambda
// refuses values outside them).
const (
	MinMappingConcurrency = 2
	MaxMappingConcurrency = 1000
)

// Defaults of the esm_* attributes.
const (
	DefaultMappingUpdateInterval = 5 * time.Minute
	// MappingHeadroom is how much more concurrency than the allowed rate
	// needs the tick asks for: the instances then work 80 % of their time
	// at most, and the pacer absorbs the rest.
	MappingHeadroom = 0.25
	// MappingHysteresis is the smallest change the tick makes, relative
	// to the current concurrency (and at least 1).
	MappingHysteresis = 0.2
)

// MappingConfig is the event source mapping a loop owns (PARAMS esm_*).
type MappingConfig struct {
	// UUID identifies the mapping (esm_uuid).
	UUID string `json:"uuid"`
	// Kind is the mapping's event source (esm_kind): an SQS mapping is
	// sized and switched, a Kafka one only switched off and on.
	Kind MappingKind `json:"kind,omitempty"`
	// UpdateInterval is the least time between two updates.
	UpdateInterval time.Duration `json:"update_interval"`
	// Min and Max bound the MaximumConcurrency the tick sets, within
	// [MinMappingConcurrency, MaxMappingConcurrency].
	Min int `json:"min"`
	Max int `json:"max"`
	// Function and Queue name a foreign consumer's Lambda function and
	// SQS queue (esm_function, esm_queue; foreign.go): without a lease
	// that reports, their CloudWatch figures size the mapping. Queue ""
	// is depth_queue's (Params.MappingQueue).
	Function string `json:"function,omitempty"`
	Queue    string `json:"queue,omitempty"`
}

// MappingConcurrency is the number of concurrent Lambda instances that
// carry rate messages/s when one batch of batchSize messages takes
// batchSeconds of work (pacing excluded), with headroom:
//
//	N = ceil(rate × batchSeconds / batchSize × (1 + headroom))
//
// bounded to [MinMappingConcurrency, MaxMappingConcurrency]. One instance
// works on one batch at a time, so it drains at most batchSize /
// batchSeconds messages/s (Little's law: the work in progress is the rate
// times the time in service). A rate, batch time or headroom that is not a
// positive number counts as 0; a batch size below one message counts as one.
func MappingConcurrency(rate, batchSeconds, batchSize, headroom float64) int {
	if !(rate > 0) || !(batchSeconds > 0) {
		return MinMappingConcurrency
	}
	if !(batchSize >= 1) {
		batchSize = 1
	}
	if !(headroom > 0) {
		headroom = 0
	}
	// The epsilon keeps a product that is whole on paper (80 × 0.5 / 10 ×
	// 1.25 = 5) from rounding up on floating-point dust.
	n := math.Ceil(rate*batchSeconds/batchSize*(1+headroom) - 1e-9)
	if !(n < MaxMappingConcurrency) {
		return MaxMappingConcurrency
	}
	return max(int(n), MinMappingConcurrency)
}

// MappingScaler sets the concurrency of an event source mapping:
// pkg/adapter/lambdaesm serves it.
type MappingScaler interface {
	// MaximumConcurrency returns the mapping's ScalingConfig
	// .MaximumConcurrency, 0 when it has none.
	MaximumConcurrency(ctx context.Context, uuid string) (int, error)
	// SetMaximumConcurrency sets it to n.
	SetMaximumConcurrency(ctx context.Context, uuid string, n int) error
}

// MappingState is what STATE remembers of a loop's event source mapping.
type MappingState struct {
	// UUID is the mapping the rest is about: an edit of esm_uuid starts
	// over (the batch means stay, they are the consumers').
	UUID string `json:"uuid,omitempty"`
	// Concurrency is the mapping's MaximumConcurrency as last set or read
	// (0: not known yet).
	Concurrency int `json:"concurrency,omitempty"`
	// Target is what the allowed rate needed at the last tick (0 while the
	// consumers have not reported a batch).
	Target int `json:"target,omitempty"`
	// UpdatedAt is when the tick last changed the mapping; AttemptAt when
	// it last tried (the next try waits the update interval).
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	AttemptAt time.Time `json:"attempt_at,omitzero"`
	// Error is why the last attempt failed, and ErrorAt when; the next
	// successful update clears them.
	Error   string    `json:"error,omitempty"`
	ErrorAt time.Time `json:"error_at,omitzero"`
	// BatchSeconds and BatchSize are the mean working time of a batch and
	// its mean size over the batches reported since the previous tick (or
	// the last tick that saw any); 0 before the first report.
	BatchSeconds float64 `json:"batch_seconds,omitempty"`
	BatchSize    float64 `json:"batch_size,omitempty"`
	// Counts are each reporting instance's batch count at the last tick:
	// the baselines of the next.
	Counts map[string]protocol.BatchCount `json:"counts,omitempty"`
	// Disabled is true while the tick has turned the mapping off (a
	// pause), since SwitchedAt, the last time it turned it off or on.
	Disabled   bool      `json:"disabled,omitempty"`
	SwitchedAt time.Time `json:"switched_at,omitzero"`
	// Floor is true while the tick holds a foreign consumer's mapping off
	// because the allowed rate is below what two instances take
	// (foreign.go).
	Floor bool `json:"floor,omitempty"`
	// Held is true while the mapping is held off for an outage of the
	// destination, since HeldSince (outage.go); Probing while it is on
	// for a probe; ProbeAt is the next probe, ProbeEvery the wait
	// before it.
	Held       bool          `json:"held,omitempty"`
	HeldSince  time.Time     `json:"held_since,omitzero"`
	Probing    bool          `json:"probing,omitempty"`
	ProbeAt    time.Time     `json:"probe_at,omitzero"`
	ProbeEvery time.Duration `json:"probe_every,omitempty"`
	// HeldStored are the consumers' stored counts as the hold last saw
	// them: the baselines of an instance idle for longer than the demand
	// counts keep it.
	HeldStored map[string]int64 `json:"held_stored,omitempty"`
}

// MappingReport is what a tick did with a loop's event source mapping.
type MappingReport struct {
	UUID string `json:"uuid"`
	// Concurrency is the mapping's MaximumConcurrency after the tick (0:
	// unknown); Target what the allowed rate needs (0: no batch reported
	// yet, the mapping is left alone).
	Concurrency int `json:"concurrency"`
	Target      int `json:"target"`
	// Updated is true when this tick changed the mapping.
	Updated bool `json:"updated"`
	// Err is why this tick's update failed: the consumers keep pacing in
	// the Lambda at the concurrency the mapping has.
	Err string `json:"error,omitempty"`
	// BatchSeconds and BatchSize are the measured means the target comes
	// from.
	BatchSeconds float64 `json:"batch_seconds"`
	BatchSize    float64 `json:"batch_size"`
	// Disabled is true when the mapping is off after the tick (a pause);
	// Switched when this tick turned it off or on.
	Disabled bool `json:"disabled,omitempty"`
	Switched bool `json:"switched,omitempty"`
	// Held is true while the mapping is held off for an outage of the
	// destination, Probing while it is on for a probe (outage.go).
	Held    bool `json:"held,omitempty"`
	Probing bool `json:"probing,omitempty"`
	// Probe is the outcome of this tick's probe of the destination
	// through the consumer function (ProbeUp, ProbeDown, ProbeUnavailable;
	// "" when none), ProbeErr why it could not be made.
	Probe    string `json:"probe,omitempty"`
	ProbeErr string `json:"probe_error,omitempty"`
	// Foreign is true when the means come from a foreign consumer's
	// CloudWatch figures (foreign.go); FloorRate is then what two
	// instances take (0: unknown), and FloorOff whether the mapping is
	// off because the allowed rate is below it.
	Foreign   bool    `json:"foreign,omitempty"`
	FloorRate float64 `json:"floor_rate,omitempty"`
	FloorOff  bool    `json:"floor_off,omitempty"`
}

// measureBatches folds the batch counts the peers report into the means
// of the batches since the previous tick (prev's baselines). A count below
// its baseline (an instance id reused) or without one counts whole: the
// means need no time base. Without new batches the previous means stay.
func measureBatches(peers []protocol.Peer, prev MappingState, now time.Time) MappingState {
	m := prev
	m.Counts = make(map[string]protocol.BatchCount, len(peers))
	var sum protocol.BatchCount
	for _, p := range peers {
		if now.Sub(p.ExpiresAt) > protocol.PeerRetention {
			continue
		}
		c := p.BatchCount()
		m.Counts[p.Instance] = c
		d := c
		if base, ok := prev.Counts[p.Instance]; ok && c.Batches >= base.Batches {
			d = protocol.BatchCount{Batches: c.Batches - base.Batches, Messages: c.Messages - base.Messages, Working: c.Working - base.Working}
		}
		sum.Batches += d.Batches
		sum.Messages += d.Messages
		sum.Working += d.Working
	}
	if len(m.Counts) == 0 {
		m.Counts = nil
	}
	if sum.Batches > 0 {
		n := float64(sum.Batches)
		m.BatchSeconds, m.BatchSize = sum.Working.Seconds()/n, float64(sum.Messages)/n
	}
	return m
}

// reportedAt is each peer's report time.
func reportedAt(peers []protocol.Peer) map[string]time.Time {
	at := make(map[string]time.Time, len(peers))
	for _, p := range peers {
		at[p.Instance] = p.ReportedAt
	}
	return at
}

// change reports whether the mapping moves from cur to target: when cur
// is unknown (0: the mapping has no MaximumConcurrency) or outside [Min,
// Max], or differs from target by at least MappingHysteresis of cur (and at
// least 1).
func (c MappingConfig) change(cur, target int) bool {
	if cur < c.Min || cur > c.Max {
		return true
	}
	return math.Abs(float64(target-cur)) >= max(1, MappingHysteresis*float64(cur))
}

// scaleMapping is the tick's coarse actuator for a loop that owns an event
// source mapping: it measures the consumers' batches, computes the
// concurrency the allowed rate needs, and sets it (actuate). The outcome is
// recorded in c's STATE (committed with the tick) and in r. A failure is
// recorded and retried after the update interval; RATE is written as
// always, so the consumers keep pacing in the Lambda.
func (t *Ticker) scaleMapping(ctx context.Context, w *due, c *Commit, r *Report) {
	p := w.params.Mapping
	if p == nil {
		c.State.Mapping = MappingState{}
		return
	}
	now := c.State.TickAt
	var prev MappingState
	if w.snap.State != nil {
		prev = w.snap.State.Mapping
	}
	if prev.UUID != p.UUID {
		prev = MappingState{UUID: p.UUID, BatchSeconds: prev.BatchSeconds, BatchSize: prev.BatchSize, Counts: prev.Counts}
	}
	var prevTick time.Time
	if w.snap.State != nil {
		prevTick = w.snap.State.TickAt
	}
	m := measureBatches(unsettled(w.snap.Peers, prevTick), prev, now)
	m.Counts, _ = capBaselines(m.Counts, reportedAt(w.snap.Peers))
	m.Target = 0
	if m.BatchSeconds > 0 && p.scaled() {
		m.Target = min(max(MappingConcurrency(c.State.Rate, m.BatchSeconds, m.BatchSize, MappingHeadroom), p.Min), p.Max)
	}
	rep := &MappingReport{UUID: p.UUID, Target: m.Target, BatchSeconds: m.BatchSeconds, BatchSize: m.BatchSize}
	floor := false
	if w.foreign() {
		floor = w.sizeForeign(c.State.Rate, &m, rep) // a consumer without Sluice code (foreign.go)
	} else {
		m.Floor = false
	}
	// A pause turns the mapping off in every mode (pause.go), an outage
	// of the destination outside shadow mode (outage.go), a foreign
	// consumer's floor outside shadow mode.
	held := t.holdForOutage(ctx, w, &m, rep, now)
	off := w.params.Paused || held || floor
	t.switchMapping(ctx, *p, off, &m, rep, now)
	rep.FloorOff = floor && m.Disabled
	// Shadow mode computes without acting; without a batch report there
	// is nothing to size the mapping by; a mapping turned off keeps its
	// size.
	if m.Target > 0 && w.params.Mode != ModeShadow && !off && rep.Err == "" {
		updated, err := t.actuate(ctx, *p, &m, now)
		rep.Updated = updated
		if err != nil {
			m.Error, m.ErrorAt, rep.Err = err.Error(), now, err.Error()
		} else if updated {
			m.Error, m.ErrorAt = "", time.Time{}
		}
	}
	rep.Concurrency = m.Concurrency
	r.Mapping = rep
	c.State.Mapping = m
}

// actuate sets the mapping to m.Target when the update interval has passed
// since the last attempt and the change is worth it; it reads the
// mapping's concurrency first when STATE does not know it. It reports
// whether it changed the mapping.
func (t *Ticker) actuate(ctx context.Context, p MappingConfig, m *MappingState, now time.Time) (bool, error) {
	if !m.AttemptAt.IsZero() && now.Sub(m.AttemptAt) < p.UpdateInterval {
		return false, nil
	}
	if t.Mappings == nil {
		m.AttemptAt = now
		return false, fmt.Errorf("event source mapping %s: the controller has no Lambda client (Ticker.Mappings)", p.UUID)
	}
	if m.Concurrency == 0 {
		cur, err := t.Mappings.MaximumConcurrency(ctx, p.UUID)
		if err != nil {
			m.AttemptAt = now
			return false, fmt.Errorf("read MaximumConcurrency: %w", err)
		}
		m.Concurrency = cur
	}
	if !p.change(m.Concurrency, m.Target) {
		return false, nil
	}
	m.AttemptAt = now
	if err := t.Mappings.SetMaximumConcurrency(ctx, p.UUID, m.Target); err != nil {
		return false, fmt.Errorf("set MaximumConcurrency to %d: %w", m.Target, err)
	}
	m.Concurrency, m.UpdatedAt = m.Target, now
	return true, nil
}

// Clone returns a deep copy of m.
func (m MappingState) Clone() MappingState {
	m.Counts = maps.Clone(m.Counts)
	m.HeldStored = maps.Clone(m.HeldStored)
	return m
}
