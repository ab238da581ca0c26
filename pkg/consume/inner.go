package consume

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// InnerConfig configures an InnerLoop: the fast local loop that a consumer
// runs under the controller's rate on its own sink's store latency. The
// zero value of each field means its default.
type InnerConfig struct {
	// Tolerance is how far, relative to the learned reference, the filtered
	// latency per message may rise before the inner loop cuts (default 0.2).
	// Once it cuts, it regulates the latency back to the reference itself
	// and lets go when its cut is no longer needed.
	Tolerance float64 `json:"tolerance,omitempty"`
	// Trip, when set, is the rise that engages the cut instead (default
	// Tolerance); the share's steadiness, the rise of the allowed rate that
	// suspends the reference and the window of a first reference stay
	// judged by Tolerance, which follows the outer loop's noise, not the
	// destination's latency. A destination that queues like one server at
	// setpoint u (a fraction) is (1-u)/(1-u-b) times slower at u+b: at a 30 %
	// setpoint, 5 points above it is a rise of 0.077, which a trip of 0.2
	// lets pass until the CPU stands near 42 %.
	Trip float64 `json:"trip,omitempty"`
	// ReactionTime is the integral time of the cut: how fast it deepens
	// while the latency stays above the reference and releases once it is
	// below (default 20 s, about the destination's own lag plus dead time).
	ReactionTime time.Duration `json:"reaction_time,omitempty"`
	// Settle is how long the share must hold steady (within Tolerance),
	// used in full, before the latency counts as the latency at the
	// setpoint (default 3 min: three controller ticks).
	Settle time.Duration `json:"settle,omitempty"`
	// Learn is the time constant over which the reference follows the
	// latency while the outer loop is settled (default 5 min).
	Learn time.Duration `json:"learn,omitempty"`
	// Floor is the deepest cut, as a fraction of the share (default 0.1).
	Floor float64 `json:"floor,omitempty"`
	// Filter is the time constant of the latency's filter (default 2 s);
	// no one store weighs more than a third in it.
	Filter time.Duration `json:"filter,omitempty"`
	// Probe is how long a cut may last without the latency ever falling
	// by a Trip below its peak since the cut began before the inner loop
	// decides that the latency does not respond to this consumer's load
	// and lets go for Settle (default ReactionTime / 2). A probe also spans
	// at least eight stores after the cut began, so that a consumer
	// that stores a batch every few seconds sees the latency answer.
	Probe time.Duration `json:"probe,omitempty"`
}

func (c InnerConfig) withDefaults() InnerConfig {
	pos := func(v, d float64) float64 {
		if v > 0 && !math.IsInf(v, 0) {
			return v
		}
		return d
	}
	dur := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	c.Tolerance = pos(c.Tolerance, 0.2)
	c.Trip = pos(c.Trip, c.Tolerance)
	c.Floor = math.Min(pos(c.Floor, 0.1), 1)
	c.ReactionTime = dur(c.ReactionTime, 20*time.Second)
	c.Settle = dur(c.Settle, 3*time.Minute)
	c.Learn = dur(c.Learn, 5*time.Minute)
	c.Filter = dur(c.Filter, 2*time.Second)
	c.Probe = dur(c.Probe, c.ReactionTime/2)
	return c
}

// Validate reports whether c is usable, with a reason.
func (c InnerConfig) Validate() error {
	switch {
	case math.IsNaN(c.Tolerance) || c.Tolerance < 0 || c.Tolerance > 10:
		return fmt.Errorf("inner tolerance %v: must be in [0, 10] (0: default 0.2)", c.Tolerance)
	case math.IsNaN(c.Trip) || c.Trip < 0 || c.Trip > 10:
		return fmt.Errorf("inner trip %v: must be in [0, 10] (0: the tolerance)", c.Trip)
	case math.IsNaN(c.Floor) || c.Floor < 0 || c.Floor > 1:
		return fmt.Errorf("inner floor %v: must be in [0, 1] (0: default 0.1)", c.Floor)
	case c.ReactionTime < 0 || c.Settle < 0 || c.Learn < 0 || c.Filter < 0 || c.Probe < 0:
		return fmt.Errorf("inner loop times must not be negative")
	}
	return nil
}

// innerKp is the proportional gain of the cut on the log latency ratio.
const innerKp = 1.5

// probeSamples is the fewest stores after a cut began over which a probe
// judges whether the latency answers it: the batches already in flight
// and the peers' cuts take a few stores to show, and the filter as many
// as it spans (filterStores) to follow.
const probeSamples = 5 + filterStores

// filterStores is the fewest stores the latency's filter spans: a consumer
// that stores a batch every few seconds (longer than Filter) would
// otherwise take each batch's noise as the latency, and trip on it.
const filterStores = 3

// windowFilter is the time constant of the latency that the window of a
// first reference is judged by: one consumer's filtered latency swings
// with how many of its peers' batches run beside it (±25 % on MariaDB at
// a steady load, over tens of seconds), and a window judged by it rarely
// spans Settle; a burst still leaves the slow one within seconds.
const windowFilter = 30 * time.Second

// fleetFresh is how old a reading of the fleet's latency ratio may be for
// the inner loop to regulate on it: three lease refreshes
// (DefaultLeaseEvery); older, it uses its own latency.
const fleetFresh = 3 * DefaultLeaseEvery

// fleetLeast is the fewest leases with a reference that make a fleet: one
// consumer's own latency is no mean.
const fleetLeast = 2

// letGo is the cut below which the inner loop lets go once the latency is
// below the reference: the last step of the release, so that a cut whose
// latency sits at the reference does not linger near 1 for ever.
const letGo = 0.02

// InnerSample is what one store taught the inner loop.
type InnerSample struct {
	// At is when the store ended.
	At time.Time
	// Messages is how many messages the store carried; PerMessage its
	// time per message.
	Messages   int
	PerMessage time.Duration
	// Failed is how many of them the destination failed or throttled: a
	// destination that sheds load counts as one above tolerance.
	Failed int
}

// InnerState is the inner loop's state: plain data, so that a host may
// save and restore it.
type InnerState struct {
	// Ref is the learned latency per message at the setpoint, seconds (0:
	// none yet); RefShare the share it was learned at.
	Ref      float64 `json:"ref"`
	RefShare float64 `json:"ref_share"`
	// RefTotal is the loop's allowed rate the reference was learned at.
	// Suspended is true while the allowed rate is above it by more than
	// the tolerance: the reference is not in force (a higher rate is
	// expected to be slower) until the rate comes back, and is learned
	// anew once the higher rate has settled.
	// A total the latency has not answered (it held for Probe with the
	// latency within the tolerance of the reference) raises RefTotal to
	// it: the outer loop walking the rate up tick by tick is no edit while
	// the destination does not slow down.
	RefTotal  float64 `json:"ref_total,omitempty"`
	Suspended bool    `json:"suspended,omitempty"`
	// Latency is the filtered latency per message, seconds.
	Latency float64 `json:"latency"`
	// Cut is the log of the fraction of the share let through (0: none);
	// Integral its integral part.
	Cut      float64 `json:"cut"`
	Integral float64 `json:"integral"`
	// Engaged is true while the inner loop cuts; EngagedAt when it began,
	// Peak the highest filtered latency since and PeakErr the highest log
	// latency ratio it regulated on, Responded whether that ratio has
	// since fallen a Trip below it and Samples how many stores it
	// has seen since.
	Engaged   bool      `json:"engaged"`
	EngagedAt time.Time `json:"engaged_at"`
	Peak      float64   `json:"peak"`
	PeakErr   float64   `json:"peak_err,omitempty"`
	Responded bool      `json:"responded"`
	Samples   int       `json:"samples,omitempty"`
	// Share is the share in force and Total the loop's allowed rate it is
	// part of; SteadySince is since when Total held within tolerance;
	// Taken counts the messages observed since then (at Share).
	Share       float64   `json:"share"`
	Total       float64   `json:"total,omitempty"`
	SteadySince time.Time `json:"steady_since"`
	Taken       float64   `json:"taken"`
	// Held is the last total paced at and HeldSince since when it holds.
	Held      float64   `json:"held,omitempty"`
	HeldSince time.Time `json:"held_since,omitempty"`
	// Slow is the latency per message filtered over windowFilter (30 s),
	// seconds: what the window of a first reference is judged by.
	Slow float64 `json:"slow,omitempty"`
	// Window is the mean latency per message, seconds, over Count
	// messages since WindowSince: the stores since the share last changed
	// whose slowly filtered latency (Slow) stayed within the tolerance of it. A first
	// reference is the window's mean once it spans Settle, not the
	// latency of the moment (which may be a burst's that began within
	// the settled share, before the outer loop saw it).
	Window      float64   `json:"window,omitempty"`
	Count       float64   `json:"count,omitempty"`
	WindowSince time.Time `json:"window_since,omitempty"`
	// Paced is the share of the last pace: the rate may drift within the
	// tolerance below Share, and a consumer that takes all of a lower share
	// is not demand-limited.
	Paced float64 `json:"paced,omitempty"`
	// Last is the time of the last sample; HoldUntil ends a pause after
	// a probe showed the latency does not respond.
	Last      time.Time `json:"last"`
	HoldUntil time.Time `json:"hold_until"`
	// Fleet is the loop's latency ratio across its consumers
	// (protocol.FleetLatency) over FleetN leases, read at FleetAt: while
	// it is fresh and over at least two leases, the inner loop regulates
	// on it instead of its own latency (Fleet).
	Fleet   float64   `json:"fleet,omitempty"`
	FleetN  int       `json:"fleet_n,omitempty"`
	FleetAt time.Time `json:"fleet_at,omitzero"`
}

// InnerLoop is the fast local limiter under the controller's rate: it may
// only cut a consumer's pace below its share, never raise it (docs/consumers.md,
// "The inner loop"). It is plain data plus Observe and Pace, not safe for
// concurrent use on its own (the Consumer serializes it).
type InnerLoop struct {
	Config InnerConfig `json:"config"`
	State  InnerState  `json:"state"`
}

// NewInnerLoop returns an inner loop with c's defaults filled in.
func NewInnerLoop(c InnerConfig) *InnerLoop { return &InnerLoop{Config: c.withDefaults()} }

// Reference is the learned latency per message in force, seconds: 0 before
// one is learned and while it is suspended.
func (l *InnerLoop) Reference() float64 {
	if l.State.Suspended {
		return 0
	}
	return l.State.Ref
}

// Fraction is the part of the share the inner loop lets through, in
// [Floor, 1].
func (l *InnerLoop) Fraction() float64 { return math.Exp(l.State.Cut) }

// Pace is the pace for share when this consumer is the loop's only one:
// PaceShare(now, share, share).
func (l *InnerLoop) Pace(now time.Time, share float64) float64 { return l.PaceShare(now, share, share) }

// PaceShare is the pace for share, this consumer's part of the loop's
// allowed rate total: share x Fraction, never above share. A change of total
// by more than the tolerance is an edit of the outer loop: it restarts the
// wait for a settled share, and a rise beyond the total the reference was
// learned at suspends the reference (a higher rate is expected to be
// slower), so the inner loop lets go; it takes the reference back when the
// rate comes back within the tolerance (the outer loop's answer to one
// noisy reading), and learns anew once the higher rate has settled. A total
// the latency did not answer is no edit: see InnerState.RefTotal. A change
// of the share alone is a change of the peers that share total (a consumer
// started, a lease lapsed): the destination's load is the same, so the
// reference and the wait stand; the messages taken count on at the new
// share. A total that is not a positive finite rate is taken as share.
func (l *InnerLoop) PaceShare(now time.Time, share, total float64) float64 {
	s, tol := &l.State, l.Config.Tolerance
	if math.IsNaN(share) || share <= 0 || math.IsInf(share, 1) {
		// No share to cut: the next one starts a new wait.
		s.Share, s.Total, s.Cut, s.Integral, s.Engaged = 0, 0, 0, 0, false
		return share
	}
	if math.IsNaN(total) || total <= 0 || math.IsInf(total, 1) {
		total = share
	}
	l.followDrift(now, total)
	switch {
	case s.Share <= 0 || s.Total <= 0 || math.Abs(total-s.Total) > tol*s.Total:
		s.Share, s.Total, s.SteadySince, s.Taken = share, total, now, 0
		s.Count = 0
		s.Suspended = s.Ref > 0 && total > s.refTotal()*(1+tol)
		if s.Suspended {
			s.Cut, s.Integral, s.Engaged = 0, 0, false
		}
	case math.Abs(share-s.Share) > tol*s.Share:
		s.Taken *= share / s.Share
		s.Share = share
	}
	s.Paced = share
	return share * l.Fraction()
}

// Fleet tells the inner loop the loop's latency ratio across its
// consumers, read at at over n leases with a reference (their leases'
// filtered latency over their reference: protocol.FleetLatency). One
// consumer that stores a batch every few seconds sees its latency swing
// with how many of its peers' batches run beside it; the fleet's mean
// does not. While the reading is fresh (three lease refreshes) and over at
// least two leases, the cut regulates on the fleet's ratio, so that all
// consumers cut alike, also one that has not learned a reference of its
// own; its own latency still teaches it its reference. A ratio that is
// not a positive finite number is no reading.
func (l *InnerLoop) Fleet(at time.Time, ratio float64, n int) {
	if math.IsNaN(ratio) || ratio <= 0 || math.IsInf(ratio, 0) {
		ratio, n = 0, 0
	}
	l.State.Fleet, l.State.FleetN, l.State.FleetAt = ratio, n, at
}

// fleetOn reports whether the fleet's ratio is fresh at now and over enough
// leases to regulate on.
func (s *InnerState) fleetOn(now time.Time) bool {
	return s.Fleet > 0 && s.FleetN >= fleetLeast && !s.FleetAt.IsZero() && now.Sub(s.FleetAt) <= fleetFresh
}

// Unsettled tells the inner loop that the outer loop is away from its
// setpoint (RATE's inner settings say so: the controller's newest
// datapoint is stale or off the setpoint, as in a start-up ramp or a
// burst the controller has seen): the latency now is not the setpoint's,
// so the wait for a settled share and the window of a first reference
// start again, and nothing is learned until the share has held for Settle
// after the outer loop settled. The cut is not touched.
func (l *InnerLoop) Unsettled(now time.Time) {
	s := &l.State
	s.SteadySince, s.Taken, s.Count = now, 0, 0
}

// followDrift raises RefTotal to a total that has held for Probe, with a
// store since, while the reference was in force, no cut was on and the
// latency stayed within the tolerance of the reference: the destination
// takes that rate at the setpoint's latency.
func (l *InnerLoop) followDrift(now time.Time, total float64) {
	s := &l.State
	if total != s.Held {
		s.Held, s.HeldSince = total, now
		return
	}
	if s.Ref <= 0 || s.Suspended || s.Engaged || s.Cut != 0 || s.Last.Sub(s.HeldSince) < l.Config.Probe {
		return
	}
	if s.Latency <= s.Ref*(1+l.Config.Tolerance) && total > s.refTotal() {
		s.RefTotal = total
	}
}

// refTotal is the total the reference was learned at (a state saved before
// RefTotal was kept: the share it was learned at).
func (s *InnerState) refTotal() float64 {
	if s.RefTotal > 0 {
		return s.RefTotal
	}
	return s.RefShare
}

// Observe folds one store into the inner loop: it filters the latency,
// learns the reference while the outer loop is settled and the inner loop
// does not cut, and otherwise runs the cut's control law.
func (l *InnerLoop) Observe(x InnerSample) {
	s, c := &l.State, &l.Config
	if x.Messages <= 0 || x.PerMessage <= 0 {
		return
	}
	dt := x.At.Sub(s.Last).Seconds()
	if s.Last.IsZero() || dt <= 0 {
		dt = 0
	}
	s.Last = x.At
	y := x.PerMessage.Seconds()
	if s.Latency == 0 {
		s.Latency, s.Slow = y, y
	} else {
		w := min(1-math.Exp(-dt/c.Filter.Seconds()), 1.0/filterStores)
		s.Latency += w * (y - s.Latency)
		if s.Slow == 0 { // a state saved before Slow was kept
			s.Slow = s.Latency
		}
		s.Slow += (1 - math.Exp(-dt/windowFilter.Seconds())) * (y - s.Slow)
	}
	s.Taken += float64(x.Messages)
	l.window(x)
	if x.At.Before(s.HoldUntil) {
		return
	}
	if s.Ref <= 0 || s.Suspended || (!s.Engaged && s.Cut == 0) {
		l.learn(x.At, dt)
	}
	switch {
	case !s.Suspended && (s.Ref > 0 || s.fleetOn(x.At)):
		l.regulate(x, dt)
	case s.Engaged || s.Cut != 0:
		// A cut on the fleet's ratio, by a consumer with no reference of
		// its own, whose readings have aged: nothing to regulate on.
		s.Cut, s.Integral, s.Engaged = 0, 0, false
	}
}

// window folds x into the latency's window, which starts anew at x when
// the filtered latency has left it by more than the tolerance.
func (l *InnerLoop) window(x InnerSample) {
	s, n := &l.State, float64(x.Messages)
	if s.Count > 0 && math.Abs(math.Log(s.Slow/s.Window)) <= math.Log1p(l.Config.Tolerance) {
		s.Count += n
		s.Window += n / s.Count * (x.PerMessage.Seconds() - s.Window)
		return
	}
	s.Window, s.Count, s.WindowSince = s.Latency, n, x.At
}

// learn moves the reference toward the filtered latency while the share has
// held steady for Settle and was used in full (not a demand-limited
// consumer, whose latency is below the setpoint's).
func (l *InnerLoop) learn(now time.Time, dt float64) {
	s, c := &l.State, &l.Config
	held := now.Sub(s.SteadySince)
	busy := s.Share
	if s.Paced > 0 {
		busy = math.Min(busy, s.Paced)
	}
	if s.Share <= 0 || held < c.Settle || s.Taken < 0.9*busy*held.Seconds() {
		return
	}
	if s.Ref <= 0 || s.Suspended {
		if s.Count == 0 || now.Sub(s.WindowSince) < c.Settle {
			return
		}
		s.Ref, s.RefShare, s.RefTotal, s.Suspended = s.Window, s.Share, s.Total, false
		return
	}
	a := math.Exp(-dt / c.Learn.Seconds())
	s.Ref = a*s.Ref + (1-a)*s.Latency
	s.RefShare = a*s.RefShare + (1-a)*s.Share
	if s.RefTotal <= 0 { // a state saved before RefTotal was kept
		s.RefTotal = s.Total
	}
	s.RefTotal = a*s.RefTotal + (1-a)*s.Total
}

// regulate is the cut's control law on the log of the latency ratio
// e = ln(latency / reference): it engages when e exceeds ln(1 + Trip)
// (or the destination failed messages), then sets the log of the fraction
// let through to I - innerKp e, I integrating -e over ReactionTime, both
// within [ln Floor, 0] (no windup), and lets go once the latency is below
// the reference and the cut within letGo of nothing. A cut the latency
// never answered within Probe (and probeSamples stores) is released: the
// latency does not respond to this consumer's load.
func (l *InnerLoop) regulate(x InnerSample, dt float64) {
	s, c := &l.State, &l.Config
	var e float64
	if s.fleetOn(x.At) {
		e = math.Log(s.Fleet)
	} else {
		e = math.Log(s.Latency / s.Ref)
	}
	trip, measured := math.Log1p(c.Trip), e
	if x.Failed > 0 {
		e = math.Max(e, 2*trip)
	}
	if !s.Engaged {
		if e <= trip {
			return
		}
		s.Engaged, s.EngagedAt, s.Peak, s.PeakErr, s.Responded, s.Samples = true, x.At, s.Latency, measured, false, -1
	}
	s.Peak = math.Max(s.Peak, s.Latency)
	s.PeakErr = math.Max(s.PeakErr, measured)
	s.Responded = s.Responded || measured+trip < s.PeakErr
	s.Samples++
	if x.At.Sub(s.EngagedAt) > c.Probe && s.Samples >= probeSamples && !s.Responded {
		s.Cut, s.Integral, s.Engaged, s.Ref, s.Suspended = 0, 0, false, 0, false
		s.HoldUntil, s.SteadySince, s.Taken, s.Count = x.At.Add(c.Settle), x.At, 0, 0
		return
	}
	floor := math.Log(c.Floor)
	s.Integral = math.Max(floor, math.Min(0, s.Integral-e*dt/c.ReactionTime.Seconds()))
	s.Cut = math.Max(floor, math.Min(0, s.Integral-innerKp*e))
	if s.Cut == 0 || (e < 0 && s.Cut > math.Log(1-letGo)) {
		s.Cut, s.Integral, s.Engaged = 0, 0, false
	}
}

// innerGuard is a Consumer's inner loop behind a lock (l nil: none now),
// with what it withheld since the last pace: (share - pace) over the time
// since. A guard that follows RATE (the Consumer's Config.Inner is nil)
// starts, retunes and stops its loop by the inner settings RATE carries.
type innerGuard struct {
	mu       sync.Mutex
	l        *InnerLoop
	follow   bool
	log      *slog.Logger
	settings protocol.InnerSettings // what l was made from, when following
	last     time.Time
	withheld float64 // messages/s withheld at last
	carry    float64 // the fraction of a message not yet counted
}

// newInnerGuard is the guard of a Consumer whose Config.Inner is c: a fixed
// inner loop when c is set, else one that follows RATE.
func newInnerGuard(c *InnerConfig, log *slog.Logger) *innerGuard {
	if c == nil {
		return &innerGuard{follow: true, log: log}
	}
	return &innerGuard{l: NewInnerLoop(*c)}
}

// pace is a.Share as the inner loop lets it through (the share itself
// without one); it counts into stats.Withheld the messages the cut held back
// since the last pace.
func (g *innerGuard) pace(now time.Time, a Allowed, stats *Stats) float64 {
	share := a.Share
	if g == nil {
		return share
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() && now.After(g.last) {
		g.carry += g.withheld * now.Sub(g.last).Seconds()
		n := math.Floor(g.carry)
		g.carry -= n
		stats.Withheld.Add(int64(n))
	}
	g.last, g.withheld = now, 0
	if g.follow && !a.Fallback {
		g.followRate(a.Inner)
		if g.l != nil && a.Inner != nil && a.Inner.Unsettled {
			g.l.Unsettled(now)
		}
	}
	if g.l == nil {
		stats.InnerLatency.Store(0)
		stats.InnerReference.Store(0)
		return share
	}
	if ratio, n, at := stats.Fleet(); !at.IsZero() {
		g.l.Fleet(at, ratio, n)
	}
	stats.InnerLatency.Store(int64(g.l.State.Latency * 1e9))
	stats.InnerReference.Store(int64(g.l.Reference() * 1e9))
	p := g.l.PaceShare(now, share, a.Total)
	if p < share && !math.IsInf(share, 1) {
		g.withheld = share - p
	}
	return p
}

// followRate starts, retunes or stops the inner loop by RATE's inner
// settings in: nil (or settings InnerConfig refuses) stops it, with no cut;
// new settings keep what the loop learned (its reference, filter and cut),
// which do not depend on them. A RATE that is not in force (the safe rate)
// changes nothing: the loop keeps the controller's last word.
func (g *innerGuard) followRate(in *protocol.InnerSettings) {
	if in != nil && innerConfigOf(in).Validate() != nil {
		in = nil
	}
	if in != nil && in.Unsettled { // a state of the loop, not a setting
		settings := *in
		settings.Unsettled = false
		in = &settings
	}
	switch {
	case in == nil && g.l != nil:
		g.l = nil
		g.log.Info("inner loop off: RATE carries no usable inner settings")
	case in == nil:
	case g.l == nil:
		g.l, g.settings = NewInnerLoop(innerConfigOf(in)), *in
		g.log.Info("inner loop on: RATE carries its settings", "tolerance", in.Tolerance, "trip", in.Trip, "reaction_time", in.ReactionTime, "settle", in.Settle)
	case *in != g.settings:
		g.l.Config, g.settings = innerConfigOf(in).withDefaults(), *in
		g.log.Info("inner loop retuned by RATE", "tolerance", in.Tolerance, "trip", in.Trip, "reaction_time", in.ReactionTime, "settle", in.Settle)
	}
}

// innerConfigOf is the InnerConfig of RATE's inner settings in (a Settle of
// 0, from an older controller: the default).
func innerConfigOf(in *protocol.InnerSettings) InnerConfig {
	return InnerConfig{Tolerance: in.Tolerance, Trip: in.Trip, ReactionTime: in.ReactionTime, Settle: in.Settle}
}

// observe folds one store of n messages that took d into the inner loop:
// those the destination failed (err: all of them) or refused transiently
// count as failed, but not those waiting for another message.
func (g *innerGuard) observe(now time.Time, n int, d time.Duration, res []Result, err error) {
	if g == nil || n <= 0 {
		return
	}
	failed := 0
	switch {
	case err != nil || len(res) != n:
		failed = n
	default:
		for _, r := range res {
			if r.Outcome != Stored && r.Outcome != Permanent && !r.Waiting {
				failed++
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.l == nil {
		return
	}
	g.l.Observe(InnerSample{At: now, Messages: n, PerMessage: d / time.Duration(n), Failed: failed})
}

// InnerLoop returns a copy of the consumer's inner loop, its configuration
// and state (the zero InnerLoop and false when it runs none now: no
// Config.Inner and no inner settings in RATE).
func (c *Consumer) InnerLoop() (InnerLoop, bool) {
	g := c.inner
	if g == nil {
		return InnerLoop{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.l == nil {
		return InnerLoop{}, false
	}
	return *g.l, true
}
