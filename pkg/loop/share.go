package loop

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/fairshare"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// MemberReport is what a tick gave a member of a destination (member.go).
type MemberReport struct {
	// Destination, Weight and Priority are the member's PARAMS in force.
	Destination string  `json:"destination"`
	Weight      float64 `json:"weight"`
	Priority    int     `json:"priority,omitempty"`
	// Total is the destination's allowed rate the members shared, and
	// Share the member's part of it (Report.Rate / Total; 0 when Total is 0).
	Total float64 `json:"total"`
	Share float64 `json:"share"`
}

// memberTolerance is how far below its last rate a member's processed rate
// may fall before the member counts as limited by demand: a little more
// than the controller's (control's actualTolerance), since a member's
// processed rate is smoothed (ProcessedSmoothing) and lags a share that grew.
const memberTolerance = 0.1

// MemberHeadroom is what a demand-limited member claims above what its
// consumers took: twice the growth (memberTolerance) that makes it claim its
// whole share again. The member is not expected to take that margin: what
// the split gives it there goes at once to the members that take all they
// are given (pkg/fairshare's Claim.Margin), so that the members are
// expected to take the destination's rate, no more; a member whose demand
// grows takes its margin for up to a tick before it claims its whole share.
const MemberHeadroom = 2 * memberTolerance

// MemberProbe is the least a demand-limited member claims, as a fraction
// of its weight's part of the destination's rate: a member whose queue was
// idle keeps enough to show, at the next tick, that it takes all it is
// allowed, and claims its whole share again (a rate of zero would never show
// a burst).
const MemberProbe = 0.05

// memberPeerSep joins a member's loop id and a consumer's instance id in
// the destination's demand baselines, so that instance ids of different
// members never collide.
const memberPeerSep = "/"

// groupMembers takes the members out of work and hands each to its
// destination's due item, whose peers become every member's (the
// destination's controllers see the members' total processed rate). It
// returns the destinations and loops of work, and the members whose
// destination does not tick now.
func groupMembers(work []*due) (rest, orphans []*due) {
	byLoop := make(map[string]*due, len(work))
	for _, w := range work {
		if w.params.Member == nil {
			byLoop[w.snap.Loop] = w
		}
	}
	for _, w := range work {
		if w.params.Member == nil {
			rest = append(rest, w)
			continue
		}
		dest, ok := byLoop[w.params.Member.Destination]
		if !ok {
			orphans = append(orphans, w)
			continue
		}
		dest.members = append(dest.members, w)
		for _, p := range w.snap.Peers {
			p.Instance = w.snap.Loop + memberPeerSep + p.Instance
			dest.snap.Peers = append(dest.snap.Peers, p)
		}
	}
	return rest, orphans
}

// shareRate splits the destination's rate, as its commit dc sets it, among
// its members by weighted max-min fair share by demand (pkg/fairshare), and
// returns each member's commit and report. A member whose consumers took
// clearly less than its last rate (or was limited already), and no more than
// at the tick before, claims what they took plus MemberHeadroom (at least
// MemberProbe of its weight's part; demand_headroom 0 switches the claim
// off), a margin that goes again to the others; the others claim up to
// their max_rate. RATE is written for the members when it is for the
// destination (not in shadow mode).
func (w *due) shareRate(dc Commit, now time.Time, reports []Report) []memberCommit {
	total := dc.State.Rate
	claims := make([]fairshare.Claim, len(w.members))
	demands := make([]Demand, len(w.members))
	var weights float64
	for _, m := range w.members {
		weights += m.params.Member.Weight
	}
	for i, m := range w.members {
		d := m.demand
		probe := MemberProbe * total * m.params.Member.Weight / weights
		demand, margin := m.memberClaim(total, probe, w.params.TickPeriod, now)
		demands[i] = d
		mp := m.params.Member
		claims[i] = fairshare.Claim{Weight: mp.Weight, Priority: mp.Priority, Min: m.params.MinRate, Max: m.params.MaxRate,
			Demand: demand, Margin: margin}
	}
	shares := fairshare.Split(total, claims)
	out := make([]memberCommit, len(w.members))
	for i, m := range w.members {
		r := &reports[m.report]
		out[i] = memberCommit{w: m, r: r, c: m.memberCommit(dc, shares[i], demands[i], now, r)}
	}
	return out
}

// memberClaim is member m's demand and margin for the split (shareRate),
// given the destination's rate total, its probe and tick period: limited by
// demand (measureMembers), what its consumers took plus MemberHeadroom, at
// least the probe; otherwise any amount (+Inf). When its queue's depth is
// known (depth_queue), at the first tick, when it is limited, or when its
// depth moved (a figure read again, not a stale one), the claim is at most
// what the queue holds for the next tick (memberNeed): a backlog exactly
// that, no margin (its consumers take all they are given until it runs dry,
// at the tick's end); a queue without one that plus MemberHeadroom. A queue
// that holds the whole rate claims any amount. So an empty queue claims its
// probe at the first tick, a queue about to run dry leaves the rest to the
// others, and one that ran dry claims its producers' rate, not what it took
// while it drained.
func (m *due) memberClaim(total, probe float64, period time.Duration, now time.Time) (demand, margin float64) {
	d := m.demand
	demand, use := math.Inf(1), math.Inf(1)
	if d.Limited {
		demand, use = max(d.Processed*(1+MemberHeadroom), probe), d.Processed
	}
	need, changed, ok := m.memberNeed(period, now)
	first := m.snap.State == nil
	capped := ok && (d.Limited || first || changed)
	// A backlog claims what drains it over the tick, no headroom: its
	// consumers take all they are given until it ran dry.
	backlog := m.depth > need*period.Seconds()*memberTolerance
	if capped {
		c := max(need*(1+MemberHeadroom), probe)
		if backlog {
			c = max(need, probe)
		}
		use = min(use, need)
		if c < demand && c < total {
			demand = c
			if first || backlog {
				use = demand
			}
		}
	}
	if math.IsInf(demand, 1) {
		return demand, 0
	}
	return demand, max(demand-use, 0)
}

// memberNeed is what member m's queue holds for the next tick (period),
// messages/s: its depth over the period plus its producers' rate, which is
// what its consumers took since the previous tick plus the depth's change
// over that time to now (0 when not known, at the first tick); changed
// reports whether the depth moved since the previous tick (a figure read
// again, not a stale one); ok is false when the
// depth is not known (no depth_queue, demand_headroom 0, not read).
func (m *due) memberNeed(period time.Duration, now time.Time) (need float64, changed, ok bool) {
	d := m.demand
	if !m.depthKnown || m.params.DemandHeadroom <= 0 || period <= 0 {
		return 0, false, false
	}
	var arrival float64
	if prev := m.snap.State; d.Known && prev != nil {
		arrival = d.Processed
		if p := prev.Demand.Depth; p != nil && now.After(prev.TickAt) {
			arrival += (m.depth - *p) / now.Sub(prev.TickAt).Seconds()
			changed = m.depth != *p
		}
	}
	return m.depth/period.Seconds() + max(arrival, 0), changed, true
}

// measureMembers measures what each member's consumers took since the
// previous tick (its own leases), and whether it was limited by demand:
// clearly less than allowed (or limited already), and not growing (a queue
// that bursts takes more at once, and claims its share again).
func (w *due) measureMembers(now time.Time) {
	for _, m := range w.members {
		var base Demand
		var prevTick time.Time
		var prevRate float64
		if prev := m.snap.State; prev != nil {
			base, prevTick, prevRate = prev.Demand, prev.TickAt, prev.Rate
		}
		// The raw figure, not smoothed (no controller integrates it): a
		// queue that ran dry gives its share up at the next tick.
		raw := base
		raw.Known = false
		d := measureDemand(m.snap.Peers, raw, prevTick, now)
		// From the previous tick to this one, not from report to report:
		// the interval over which the queue's depth moved (memberNeed).
		if d.Known {
			d.Processed = carried(&d, base, min(prevRate, d.Processed), prevTick, now)
		}
		// Clearly less: this tick's figure, and the part of the allowed
		// rate taken averaged over ProcessedSmoothing. At ticks of a few
		// seconds the counts arrive in lumps, and one low tick of a member
		// that takes all it is allowed is no queue that ran dry; at a
		// one-minute tick the average is mostly this tick's.
		// The average starts from all taken; a part is counted up to
		// twice the allowed rate (a lump after a low tick, not a rate of
		// nothing that a burst multiplied).
		prevTaken := 1.0
		if base.Known && base.Taken != nil {
			prevTaken = *base.Taken
		}
		taken := prevTaken
		if d.Known {
			part := 1.0 // took all of nothing
			if prevRate > 0 {
				part = min(d.Processed/prevRate, 2)
			}
			a := math.Exp(-now.Sub(prevTick).Seconds() / ProcessedSmoothing.Seconds())
			taken = a*prevTaken + (1-a)*part
			d.Taken = &taken
		}
		less := d.Processed < prevRate*(1-memberTolerance) && taken < 1-memberTolerance
		d.Limited = d.Known && m.params.DemandHeadroom > 0 && (less || base.Limited) &&
			(!base.Known || d.Processed <= base.Processed*(1+memberTolerance))
		if m.depthKnown {
			depth := m.depth
			d.Depth = &depth
		}
		m.demand = d
	}
}

// carried is a member's processed rate d.Processed, counted from report
// to report, carried to the interval from the previous tick at prevTick to
// this one at now: it sets d.Unreported, what its consumers took between
// their last reports and now at rate, and adds it less the previous tick's
// (base). The counts are scaled to the tick's length already (asOfTick), so
// the reports' ages are not counted twice: the change of their mean age
// times the counted rate is taken out again. At a steady rate the figure is
// as counted; over ticks the messages sum as counted (each unreported part
// is counted at the tick after).
func carried(d *Demand, base Demand, rate float64, prevTick, now time.Time) float64 {
	dt := now.Sub(prevTick)
	lag := reportAge(d.ReportedAt, now, dt)
	d.Unreported = max(rate, 0) * lag
	shift := d.Processed * (lag - reportAge(base.ReportedAt, prevTick, dt))
	return max(0, d.Processed+(d.Unreported-base.Unreported-shift)/dt.Seconds())
}

// reportAge is the mean time, seconds, from the reports (reportedAt) to
// the tick at at, over the reporting instances; a report older than a
// quarter of the tick period dt counts 0 (a lease is refreshed every few
// seconds: an older one is a consumer that stopped, not a count that lags).
func reportAge(reportedAt map[string]time.Time, at time.Time, dt time.Duration) float64 {
	if len(reportedAt) == 0 {
		return 0
	}
	var lag time.Duration
	for _, r := range reportedAt {
		if age := at.Sub(r); age > 0 && age <= dt/4 {
			lag += age
		}
	}
	return lag.Seconds() / float64(len(reportedAt))
}

// membersDemand measures the members' demand for the split. The
// destination's controllers see the members' total processed rate (every
// member's leases, groupMembers): while every member is limited by demand,
// it holds the rate near what the plant took (no windup on idle queues);
// while a member takes all it is given, the split gives it the margins of
// the limited ones (shareRate), the members take the destination's rate,
// and its controllers raise it to the setpoint as one loop's would.
//
// The total is averaged over ProcessedSmoothing (the counts' lumps), and
// an average lags a rise. The split moves whole shares at a tick (a lower
// class given what an idle queue leaves, a queue that bursts), so the
// total steps up where one loop's rate would climb: when the members' own
// figures of this tick (not averaged) sum to more, the controllers are told
// that sum. They are told that sum as counted too (control.Input's
// ActualCounted): when the members took more than the rates in force (a
// limited member's margin, taken at a burst before the next tick claims its
// share) or less, the delay-aware history holds what the database received.
func (w *due) membersDemand(in *control.Input) {
	if len(w.members) == 0 {
		return
	}
	w.measureMembers(w.tickAt)
	var sum float64
	for _, m := range w.members {
		if !m.demand.Known {
			return
		}
		sum += m.demand.Processed + m.demand.WithheldRate
	}
	if in.ActualKnown && sum > in.ActualRate {
		in.ActualRate = sum
	}
	if in.ActualKnown {
		in.ActualCounted = sum
	}
}

// memberCommit is a member's outcome of its destination's tick.
type memberCommit struct {
	w *due
	c Commit
	r *Report
}

// memberCommit returns the commit of member m given share of the rate the
// destination's commit dc sets, and fills its report.
func (m *due) memberCommit(dc Commit, share float64, d Demand, now time.Time, r *Report) Commit {
	var st State
	if m.snap.State != nil {
		st = *m.snap.State
	}
	prevVersion := st.Version
	p := m.params
	st.Loop, st.Version, st.Schema, st.TickAt = m.snap.Loop, prevVersion+1, StateSchema, now
	st.Rate, st.Mode, st.Setpoint, st.Demand = share, dc.State.Mode, dc.State.Setpoint, d
	st.MetricAt, st.Measured = dc.State.MetricAt, dc.State.Measured
	st.Params, st.ParamsFingerprint = &p, m.fp

	r.Tick, r.Mode, r.Setpoint, r.Rate = st.Version, st.Mode, st.Setpoint, share
	r.Processed, r.ProcessedKnown, r.LivePeers, r.DemandLimited = d.Processed, d.Known, d.Live, d.Limited
	r.AtMin = share <= p.MinRate
	r.Depth, r.DepthKnown = m.depth, m.depthKnown
	r.OldestAge, r.ExpiresIn = m.forecast()
	st.OldestAge, st.ExpiresIn = r.OldestAge, r.ExpiresIn
	r.Member = &MemberReport{Destination: p.Member.Destination, Weight: p.Member.Weight, Priority: p.Member.Priority, Total: dc.State.Rate}
	if dc.State.Rate > 0 {
		r.Member.Share = share / dc.State.Rate
	}
	c := Commit{PrevVersion: prevVersion, State: st, Status: m.status}
	if m.status != nil {
		m.status.Tick = st.Version
	}
	if dc.Rate != nil {
		c.Rate = &protocol.Rate{Loop: st.Loop, PerSecond: share, WrittenAt: now, ExpiresAt: dc.Rate.ExpiresAt, Tick: st.Version,
			Inner: p.innerSettings(innerUnsettled(dc.State.Stale, dc.State.Measured, dc.State.Setpoint))}
		r.RateWritten = true
	}
	return c
}

// orphanCommit is the commit of a member whose destination does not tick
// now: nothing, or the verdict on its edited PARAMS.
func orphanCommit(m *due, r *Report) *Commit {
	r.Outcome = OutcomeNotDue
	if m.status == nil {
		return nil
	}
	c := idle(m.snap, &m.params, m.fp, m.status, r)
	r.Outcome = OutcomeNotDue
	return c
}

// withMembers is work with every destination's members.
func withMembers(work []*due) []*due {
	out := work
	for _, w := range work {
		if len(w.members) > 0 {
			if len(out) == len(work) {
				out = append([]*due(nil), work...)
			}
			out = append(out, w.members...)
		}
	}
	return out
}

// membershipProblems checks the members among the loops read
// (MembershipProblems); the refusals are keyed by loop id.
func membershipProblems(snaps []Snapshot) map[string]*FieldError {
	loops := make(map[string]map[string]any, len(snaps))
	for _, s := range snaps {
		loops[s.Loop] = s.Params
	}
	var out map[string]*FieldError
	for id, fe := range MembershipProblems(loops) {
		if out == nil {
			out = map[string]*FieldError{}
		}
		out[id] = &fe
	}
	return out
}
