package loop

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// A long outage of the destination. An SQS Lambda consumer whose
// destination is down hands every message back (an open circuit), and each
// hand-back costs the message one receive: after maxReceiveCount (5 by
// default, about 8 to 15 minutes of the consumers' retry backoff) a healthy
// message goes to the dead-letter queue. A Kafka Lambda fails the batch
// after holding it, and a mapping with an on-failure destination skips it
// after 10 retries (about 5 minutes). Only the mapping can stop the
// receives. So, for a loop that owns a mapping (SQS or Kafka), a tick that finds the
// consumers received messages and stored none since the previous tick
// (leases at work whose stored counts did not move while the rate allowed
// at least StallMessages) turns the mapping off: the outage hold. It probes
// by turning the mapping on for one tick, first ProbeFirstTicks tick
// periods after the hold began, then at intervals that double up to
// ProbeMaxTicks; a probe tick that
// sees a message stored, or no consumer at work (an empty queue), ends the
// hold, one that sees the stall again turns the mapping off until the next
// probe. Every message then costs about one receive per probe: through a
// 15-minute outage, two or three. See docs/controller.md, "Long outages".

// Outage hold settings.
const (
	// StallMessages is the least the allowed rate must have let through
	// since the previous tick for a tick without any store to count as a
	// stall (a trickle that stores nothing in a minute is not an outage).
	StallMessages = 10
	// ProbeFirstTicks is the wait from the hold to the first probe, in
	// tick periods (2 minutes at the default 1m); each failed probe
	// doubles it, up to ProbeMaxTicks (16 minutes).
	ProbeFirstTicks = 2
	ProbeMaxTicks   = 16
	// ProbeTimeout bounds a probe through the function (a cold start and
	// the function's own 5 s probe); past it the probe could not be made.
	ProbeTimeout = 15 * time.Second
)

func probeFirst(tick time.Duration) time.Duration { return ProbeFirstTicks * tick }
func probeMax(tick time.Duration) time.Duration   { return ProbeMaxTicks * tick }

// storedCounts adds the peers' stored counts to into (a new map when nil).
func storedCounts(peers []protocol.Peer, into map[string]int64) map[string]int64 {
	if into == nil {
		into = map[string]int64{}
	}
	for _, p := range peers {
		into[p.Instance] = p.Stored
	}
	return into
}

// heldStored is what the outage hold recorded of the consumers' counts
// (nil: none, or no STATE).
func (st *State) heldStored() map[string]int64 {
	if st == nil {
		return nil
	}
	return st.Mapping.HeldStored
}

// stalled reports whether the consumers worked and stored nothing since
// the previous tick prev: at least one lease reported since then, none of
// them stored a message more than its baseline (STATE's demand counts, or
// the counts the hold recorded for an instance that was idle longer than
// those keep it; an instance started since then has baseline 0), and the
// rate allowed at least StallMessages. An instance with a count it cannot compare says it
// cannot tell: false.
func stalled(peers []protocol.Peer, prev *State, now time.Time) bool {
	held := prev.heldStored()
	if prev == nil || prev.TickAt.IsZero() || prev.Rate*now.Sub(prev.TickAt).Seconds() < StallMessages {
		return false
	}
	working := 0
	for _, p := range peers {
		if p.ReportedAt.Before(prev.TickAt) {
			continue // not at work since the previous tick
		}
		base, ok := prev.Demand.Stored[p.Instance]
		if !ok {
			base, ok = held[p.Instance]
		}
		if !ok && p.StartedAt.After(prev.TickAt) {
			base, ok = 0, true
		}
		if !ok || p.Stored != base {
			return false
		}
		// Dead-lettered messages do not count: poison keeps going to the
		// dead-letter queue while the destination is down.
		working++
	}
	return working > 0
}

// MappingProber is the optional capability of a Ticker.Mappings to probe
// the destination of a mapping's consumer function without receiving a
// message: it invokes the function (the mapping's FunctionArn) with a
// protocol.ProbeEvent. pkg/adapter/lambdaesm is one.
type MappingProber interface {
	// ProbeDestination reports whether the function found its destination
	// up; an error means the probe could not be made (the invocation
	// failed, or the function does not answer probes).
	ProbeDestination(ctx context.Context, uuid string) (up bool, err error)
}

// Outcomes of a probe of the destination (MappingReport.Probe).
const (
	// ProbeUp: the function found its destination up; the hold ends.
	ProbeUp = "up"
	// ProbeDown: it found it down; the hold stays, the wait doubles.
	ProbeDown = "down"
	// ProbeUnavailable: the probe could not be made; the tick probes by
	// turning the mapping on for one tick instead.
	ProbeUnavailable = "unavailable"
)

// holdForOutage runs the outage hold of a loop that owns a mapping and
// reports whether the mapping is to be off for it. m carries the
// hold's state from tick to tick; r reports it. At a probe's time, an SQS
// mapping whose Ticker.Mappings is a MappingProber is probed through its
// function with the mapping off (probeDestination); otherwise, or when
// that probe cannot be made, the mapping is on for one tick.
func (t *Ticker) holdForOutage(ctx context.Context, w *due, m *MappingState, r *MappingReport, now time.Time) bool {
	p := w.params
	if p.Mapping == nil || p.Mode == ModeShadow || p.Paused {
		*m = endHold(*m)
		return false
	}
	stall := stalled(w.snap.Peers, w.snap.State, now)
	switch {
	case !m.Held && stall:
		m.Held, m.HeldSince, m.ProbeEvery = true, now, probeFirst(p.TickPeriod)
		m.ProbeAt, m.HeldStored = now.Add(m.ProbeEvery), storedCounts(w.snap.Peers, m.HeldStored)
	case m.Held && m.Probing && stall:
		m.Probing = false
		m.backOff(w.snap.Peers, p.TickPeriod, now)
	case m.Held && m.Probing:
		// Stored again, or nothing left to receive: the outage is over.
		*m = endHold(*m)
	case m.Held && !now.Before(m.ProbeAt):
		t.probeDestination(ctx, w, m, r, now)
	}
	r.Held, r.Probing = m.Held, m.Probing
	return m.Held && !m.Probing
}

// probeDestination is a probe of a held mapping: through its function
// when it can (an SQS mapping, a MappingProber), which ends the hold when
// the destination is up and doubles the wait when it is down; else, or
// when the probe fails, the mapping is on for one tick (Probing).
func (t *Ticker) probeDestination(ctx context.Context, w *due, m *MappingState, r *MappingReport, now time.Time) {
	pr, ok := t.Mappings.(MappingProber)
	if !ok || w.params.Mapping.Kind == MappingKafka {
		m.Probing = true
		return
	}
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	up, err := pr.ProbeDestination(pctx, w.params.Mapping.UUID)
	switch {
	case err != nil:
		r.Probe, r.ProbeErr, m.Probing = ProbeUnavailable, err.Error(), true
	case up:
		r.Probe, *m = ProbeUp, endHold(*m)
	default:
		r.Probe = ProbeDown
		m.backOff(w.snap.Peers, w.params.TickPeriod, now)
	}
}

// backOff doubles the wait before the next probe (up to ProbeMaxTicks)
// and records the consumers' counts.
func (m *MappingState) backOff(peers []protocol.Peer, tick time.Duration, now time.Time) {
	m.ProbeEvery = min(2*m.ProbeEvery, probeMax(tick))
	m.ProbeAt, m.HeldStored = now.Add(m.ProbeEvery), storedCounts(peers, m.HeldStored)
}

// endHold is m without an outage hold.
func endHold(m MappingState) MappingState {
	m.Held, m.Probing, m.HeldSince, m.ProbeAt, m.ProbeEvery, m.HeldStored = false, false, time.Time{}, time.Time{}, 0, nil
	return m
}
