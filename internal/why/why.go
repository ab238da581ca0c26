// Package why explains a loop's recent ticks from its history (the HIST
// items the controller writes, or a history file): each tick's reason, the
// events that changed them (a setpoint edit, a disturbance from outside, a
// burst after an idle queue, every change of reason), and what would change
// the reason in force. `sluice why` prints it; the e2e run checks it
// against its scenario.
package why

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// Kind is the kind of an event.
type Kind string

// Kinds of events.
const (
	// SetpointEdit: the setpoint in force changed (not by an experiment).
	SetpointEdit Kind = "setpoint edit"
	// Disturbance: load from elsewhere, with the setpoint unchanged and no
	// rate set by hand: the signal rose clearly above its setpoint while
	// the rate and the consumers' take had held, or the controller cut the
	// mean rate by a third (RateCut, RateWindow) while the consumers kept
	// taking what it allowed (a fast loop cuts the rate before the signal
	// shows it for two ticks). DisturbanceOver is its end: the signal fell
	// clearly below with the rate and the take not cut, or the mean rate
	// came back up as much.
	Disturbance     Kind = "disturbance"
	DisturbanceOver Kind = "disturbance over"
	// Burst: the end of an idle queue: after at least two ticks held by
	// demand in which the consumers took at most a tenth of what they were
	// allowed, they took at least half of it again.
	Burst Kind = "burst"
	// ReasonChange: the reason's code changed.
	ReasonChange Kind = "reason"
)

// Event is something that changed a loop's reasons, at the tick T of the
// point that shows it.
type Event struct {
	T    time.Time
	Kind Kind
	Text string
}

// window is how many ticks back a disturbance's test looks for a rise of
// the rate or a setpoint edit that would explain the signal's move (the
// loop's dead time, at most about this many ticks).
const window = 5

// RateCut and RateWindow: a disturbance seen in the rate alone is a cut
// of the mean allowed rate over the last RateWindow ticks to at most
// 1-RateCut of its mean over the RateWindow ticks before (means: on a
// noisy signal a fast loop's rate moves by a third from one tick to the
// next).
const (
	RateCut    = 1.0 / 3
	RateWindow = 6
)

// Idle and burst: an idle tick is held by demand with the consumers taking
// at most IdleShare of what they were allowed; a burst ends a run of at
// least two that spans at least the controller's average of what they took
// (its 30 s), within two ticks, at a tick when they take BurstShare of it.
// What they took at a tick is read back from that average: ticks shorter
// than it that count nothing are lumps in the counts (a busy consumer's
// lease written late), not an idle queue.
const (
	IdleShare  = 0.1
	BurstShare = 0.5
)

// Events are the events that points (oldest first) show.
func Events(points []history.Point) []Event {
	var out []Event
	var d disturbances
	b := bursts{raw: history.RawConsumed(points)}
	for i, p := range points {
		if i == 0 {
			b.at(points, 0)
			continue
		}
		q := points[i-1]
		if p.Setpoint != q.Setpoint && finite(p.Setpoint) && finite(q.Setpoint) && p.Reason != string(loop.ReasonExperiment) {
			out = append(out, Event{p.T, SetpointEdit, fmt.Sprintf("setpoint edit: %s -> %s", num(q.Setpoint), num(p.Setpoint))})
			d = disturbances{} // a new regime: what was on is no longer measured against it
		}
		if e, ok := d.at(points, i); ok {
			out = append(out, e)
		}
		if e, ok := b.at(points, i); ok {
			out = append(out, e)
		}
		if p.Reason != q.Reason && p.Reason != "" {
			out = append(out, Event{p.T, ReasonChange, fmt.Sprintf("reason: %s -> %s", cmpOr(q.Reason, "none"), p.Reason)})
		}
	}
	return out
}

// bursts follows the idle runs: raw is what the consumers took at each
// point (history.RawConsumed: the controller's average lags a burst by
// its 30 s), idle the ticks of the run up to the last point and idleFor
// the time they cover, ended the ticks left in which the end of a run can
// still show as a burst.
type bursts struct {
	raw         []history.Point
	idle, ticks int
	idleFor     time.Duration
	ended       int
}

// at reports a burst at points[i] and counts it in the idle run.
func (b *bursts) at(points []history.Point, i int) (Event, bool) {
	p, took := points[i], b.raw[i].Consumed
	allowed := p.Rate
	if i > 0 {
		allowed = points[i-1].Rate // what the consumers were paced to since the last tick
	}
	usable := finite(took) && finite(allowed) && allowed > 0 && !p.Stale && p.Reason != string(loop.ReasonManual)
	if usable && p.Reason == string(loop.ReasonDemand) && took <= IdleShare*allowed {
		b.idle++
		if i > 0 {
			b.idleFor += p.T.Sub(points[i-1].T)
		}
		b.ended = 0
		return Event{}, false
	}
	if b.idle >= 2 && b.idleFor >= p.ConsumedSmoothing {
		b.ended, b.ticks = 2, b.idle
	}
	b.idle, b.idleFor = 0, 0
	if b.ended == 0 {
		return Event{}, false
	}
	b.ended--
	if !usable || took < BurstShare*allowed {
		return Event{}, false
	}
	b.ended = 0
	return Event{p.T, Burst, fmt.Sprintf("burst: held by demand for %d ticks with the queue idle, the consumers took %s of %s msg/s; now %s",
		b.ticks, num(took), num(allowed), cmpOr(p.Reason, "no reason"))}, true
}

// disturbances is the last disturbance event named ("" for none since
// the start or the last setpoint edit) and the point of the last start.
type disturbances struct {
	last Kind
	from int
}

// at reports a disturbance starting or ending at points[i]: a start only
// when the last one named is over or 2 x RateWindow ticks old (the rate
// rule, which names a start at the first tick its cut shows, no longer
// sees that cut), an end only after a start or before any.
func (d *disturbances) at(points []history.Point, i int) (Event, bool) {
	if d.last != Disturbance || i-d.from >= 2*RateWindow {
		e, ok := signalRise(points, i)
		if !ok {
			e, ok = rateCut(points, i, false)
			if ok && i > 0 {
				_, ok = rateCut(points, i-1, false) // named where the cut first shows
				ok = !ok
			}
		}
		if ok {
			d.last, d.from = Disturbance, i
			return e, true
		}
	}
	if d.last == DisturbanceOver {
		return Event{}, false
	}
	e, ok := signalFall(points, i)
	if !ok && d.last == Disturbance {
		e, ok = rateCut(points, i, true)
	}
	if ok {
		d.last = DisturbanceOver
	}
	return e, ok
}

// calm reports whether the n ticks up to points[i] held one setpoint, no
// rate set by hand, no stale metric and no experiment: nothing in them
// explains a move of the signal or the rate but load from elsewhere.
func calm(points []history.Point, i, n int) bool {
	if i < n-1 || !finite(points[i].Setpoint) {
		return false
	}
	for k := i - n + 1; k <= i; k++ {
		p := points[k]
		switch {
		case p.Setpoint != points[i].Setpoint, p.Stale, p.Mode == string(loop.ModeManual):
			return false
		}
		switch loop.ReasonCode(p.Reason) {
		case loop.ReasonManual, loop.ReasonExperiment, loop.ReasonStale, loop.ReasonResumed:
			return false
		}
	}
	return true
}

// excess is the signal's excess over its setpoint at p, and the band
// beyond which it is clear: a tenth of the setpoint, at least 1.
func excess(p history.Point) (x, band float64) {
	return p.Measured - p.Setpoint, math.Max(1, 0.1*math.Abs(p.Setpoint))
}

// noiseBand is the band of the signal's rules at i: excess's band, or
// twice the signal's root-mean-square excess over the window before the
// move when that is wider (a noisy signal crosses a tenth of its setpoint
// every few ticks).
func noiseBand(points []history.Point, i int) float64 {
	_, band := excess(points[i])
	var ss float64
	n := 0
	for k := i - window; k <= i-2; k++ {
		if x, _ := excess(points[k]); finite(x) {
			ss += x * x
			n++
		}
	}
	if n > 0 {
		band = math.Max(band, 2*math.Sqrt(ss/float64(n)))
	}
	return band
}

// steady reports whether the rate held within a tenth of base over the
// window before the signal's move at i-1: only then is a move of the
// signal not the rate's doing (on a noisy signal a fast loop's rate moves
// by a third from tick to tick; its rate rule applies).
func steady(points []history.Point, i int, base float64) bool {
	r := rateRange(points, i-window, i-2)
	return r.lo >= base/1.1 && r.hi <= 1.1*base
}

// took is how the consumers' take moved over the window up to i: the
// controller's average at i over the one at its start (1 when either is
// unknown). A signal that moved with it is the consumers' doing (a burst,
// a queue running dry), not load from elsewhere.
func took(points []history.Point, i int) float64 {
	now, then := points[i].Consumed, points[i-window].Consumed
	if !finite(now) || !finite(then) || (now == 0 && then == 0) {
		return 1
	}
	return now / then
}

// signalRise: the signal's excess crossed the band at i-1 and stayed
// beyond it at i, the rate steady before and not risen by more than a
// tenth over the window, nor the consumers' take.
func signalRise(points []history.Point, i int) (Event, bool) {
	if !calm(points, i, window+1) || i < window+1 {
		return Event{}, false
	}
	p, base := points[i], points[i-window].Rate
	x, _ := excess(p)
	band := noiseBand(points, i)
	x1, _ := excess(points[i-1])
	x2, _ := excess(points[i-2])
	if !(x > band && x1 > band && x2 <= band) || !steady(points, i, base) || rateRange(points, i-window, i).hi > 1.1*base || took(points, i) > 1.1 {
		return Event{}, false
	}
	return Event{p.T, Disturbance, fmt.Sprintf("disturbance: the signal rose to %s, %s above its %s setpoint, while the rate did not rise (%s msg/s)",
		num(p.Measured), num(x), num(p.Setpoint), num(base))}, true
}

// signalFall is signalRise's mirror: the signal fell clearly below its
// setpoint, the rate not cut by more than a tenth, nor the consumers'
// take.
func signalFall(points []history.Point, i int) (Event, bool) {
	if !calm(points, i, window+1) || i < window+1 {
		return Event{}, false
	}
	p, base := points[i], points[i-window].Rate
	x, _ := excess(p)
	band := noiseBand(points, i)
	x1, _ := excess(points[i-1])
	x2, _ := excess(points[i-2])
	if !(x < -band && x1 < -band && x2 >= -band) || !steady(points, i, base) || rateRange(points, i-window, i).lo < base/1.1 || took(points, i) < 1/1.1 {
		return Event{}, false
	}
	return Event{p.T, DisturbanceOver, fmt.Sprintf("disturbance over: the signal fell to %s, %s below its %s setpoint, while the rate was not cut (%s msg/s)",
		num(p.Measured), num(-x), num(p.Setpoint), num(base))}, true
}

// rateCut: over the 2 x RateWindow ticks up to i, calm, the controller cut
// the mean allowed rate of the last RateWindow ticks to at most 1-RateCut
// of the mean of the RateWindow before, on its own reasons: at most half
// of the last ticks held by demand, and the consumers taking at least half
// of what they were allowed in both windows (demand stayed: a queue
// running dry, or the rate held over an idle queue that a burst ends, is
// not load from elsewhere). With the
// setpoint held, only the signal moves a controller's rate that way; the
// signal itself is too noisy on such a loop to say more. back is the
// disturbance's end: the mean rate back up by the inverse ratio.
func rateCut(points []history.Point, i int, back bool) (Event, bool) {
	w := RateWindow
	if !calm(points, i, 2*w) {
		return Event{}, false
	}
	before, after := rateRange(points, i-2*w+1, i-w).mean, rateRange(points, i-w+1, i).mean
	demand := 0
	for k := i - w + 1; k <= i; k++ {
		if points[k].Reason == string(loop.ReasonDemand) {
			demand++
		}
	}
	p := points[i]
	if !finite(before) || !finite(after) || before <= 0 || 2*demand > w || !busy(points, i-2*w+1, i-w) || !busy(points, i-w+1, i) {
		return Event{}, false
	}
	if back {
		if after*(1-RateCut) < before {
			return Event{}, false
		}
		return Event{p.T, DisturbanceOver, fmt.Sprintf("disturbance over: the rate is back up from %s to %s msg/s (means of %d ticks), the signal at %s against its %s setpoint",
			num(before), num(after), w, num(p.Measured), num(p.Setpoint))}, true
	}
	if after > (1-RateCut)*before {
		return Event{}, false
	}
	return Event{p.T, Disturbance, fmt.Sprintf("disturbance: the rate was cut from %s to %s msg/s (means of %d ticks) while the consumers took what they were allowed and the setpoint held (the signal at %s against its %s setpoint)",
		num(before), num(after), w, num(p.Measured), num(p.Setpoint))}, true
}

// busy reports whether the consumers took at least half of the allowed
// rate over points[from..to] (the controller's average; true when it is
// unknown): a queue with work, not an idle one whose held rate a burst
// ends.
func busy(points []history.Point, from, to int) bool {
	var took, allowed float64
	for k := from; k <= to; k++ {
		if !finite(points[k].Consumed) {
			return true
		}
		took += points[k].Consumed
		allowed += points[k].Rate
	}
	return took >= 0.5*allowed
}

type rates struct{ lo, hi, mean float64 }

// rateRange is the lowest, highest and mean rate of points[from..to].
func rateRange(points []history.Point, from, to int) rates {
	r := rates{lo: math.Inf(1), hi: math.Inf(-1)}
	var sum float64
	for k := from; k <= to; k++ {
		r.lo, r.hi = math.Min(r.lo, points[k].Rate), math.Max(r.hi, points[k].Rate)
		sum += points[k].Rate
	}
	r.mean = sum / float64(to-from+1)
	return r
}

// Hint is what would change a reason of code (loop.ReasonCode) on loop id.
func Hint(id, code string) string {
	set := "sluice params set --loop " + id
	switch loop.ReasonCode(code) {
	case loop.ReasonLimited:
		return "the signal against its setpoint: a higher setpoint (" + set + " setpoint=N) or less load from elsewhere raises the rate"
	case loop.ReasonMaxRate:
		return "the signal has room: a higher max_rate (" + set + " max_rate=N)"
	case loop.ReasonMinRate:
		return "the signal back under its setpoint, or a lower min_rate (" + set + " min_rate=N)"
	case loop.ReasonSlew:
		return "time (the rate moves at most slew_limit per tick), or a larger slew_limit"
	case loop.ReasonDemand:
		return "more messages or more consumers: the rate follows what the consumers take, plus demand_headroom"
	case loop.ReasonStale:
		return "a fresh datapoint of the metric (check its source), or another stale_policy or stale_after"
	case loop.ReasonResumed:
		return "nothing: the next tick runs on the metric again"
	case loop.ReasonCeiling:
		return "the signal below its ceiling"
	case loop.ReasonManual:
		return "mode=auto, or another manual_rate (" + set + " mode=auto)"
	case loop.ReasonExperiment:
		return "the experiment's end (its max_duration), or removing it (" + set + " experiment=)"
	case loop.ReasonDisabled:
		return set + " enabled=true"
	case loop.ReasonNoParams:
		return "a valid PARAMS item (sluice params validate --loop " + id + ")"
	}
	return "no reason recorded: a controller that records reasons (STATE schema 4)"
}

// Print writes the last n of points (oldest first; all when n <= 0): one
// line per tick, the events among them, the reason in force and what would
// change it.
func Print(w io.Writer, id string, points []history.Point, n int) error {
	if len(points) == 0 {
		_, err := fmt.Fprintf(w, "loop %s: no history (the controller writes one HIST item per tick unless SLUICE_HISTORY=off)\n", id)
		return err
	}
	events := Events(points)
	if n > 0 && len(points) > n {
		points = points[len(points)-n:]
	}
	from := points[0].T
	fmt.Fprintf(w, "loop %s: %d ticks, %s to %s\n", id, len(points), from.Format(time.RFC3339), points[len(points)-1].T.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tCODE\tRATE\tREASON")
	for _, p := range points {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.T.Format("15:04:05"), cmpOr(p.Reason, "-"), num(p.Rate), cmpOr(p.ReasonText, "-"))
	}
	tw.Flush()
	fmt.Fprintln(w, "events:")
	shown := 0
	for _, e := range events {
		if !e.T.Before(from) {
			fmt.Fprintf(w, "  %s  %s\n", e.T.Format("15:04:05"), e.Text)
			shown++
		}
	}
	if shown == 0 {
		fmt.Fprintln(w, "  none")
	}
	last := points[len(points)-1]
	fmt.Fprintf(w, "now: %s\n", cmpOr(last.ReasonText, "no reason recorded"))
	_, err := fmt.Fprintf(w, "what would change it: %s\n", Hint(id, last.Reason))
	return err
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func cmpOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// num is v to three significant figures ("-" when unknown).
func num(v float64) string {
	if !finite(v) {
		return "-"
	}
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
