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
	// Disturbance: the signal rose clearly above its setpoint while the
	// rate had not risen and the setpoint had not changed: load from
	// elsewhere. DisturbanceOver is its mirror: the signal fell clearly
	// below with the rate not cut.
	Disturbance     Kind = "disturbance"
	DisturbanceOver Kind = "disturbance over"
	// Burst: a loop held by demand (an idle queue) found the consumers
	// taking what it allowed again.
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

// Events are the events that points (oldest first) show.
func Events(points []history.Point) []Event {
	var out []Event
	var run demandRun
	for i, p := range points {
		if i == 0 {
			run.add(p)
			continue
		}
		q := points[i-1]
		if p.Setpoint != q.Setpoint && finite(p.Setpoint) && finite(q.Setpoint) && p.Reason != string(loop.ReasonExperiment) {
			out = append(out, Event{p.T, SetpointEdit, fmt.Sprintf("setpoint edit: %s -> %s", num(q.Setpoint), num(p.Setpoint))})
		}
		if e, ok := disturbance(points, i); ok {
			out = append(out, e)
		}
		if run.burstAt(p) {
			out = append(out, Event{p.T, Burst, fmt.Sprintf("burst: held by demand for %d ticks, the consumers took %s msg/s (from %s); now %s",
				run.ticks, num(p.Consumed), num(q.Consumed), p.Reason)})
		}
		run.add(p)
		if p.Reason != q.Reason && p.Reason != "" {
			out = append(out, Event{p.T, ReasonChange, fmt.Sprintf("reason: %s -> %s", cmpOr(q.Reason, "none"), p.Reason)})
		}
	}
	return out
}

// demandRun is the run of ticks held by demand up to the current one: how
// many, the least the consumers took in it and the most they were allowed.
type demandRun struct {
	ticks          int
	least, allowed float64
}

// add counts p in the run, or ends the run when p was not held by demand.
func (r *demandRun) add(p history.Point) {
	if p.Reason != string(loop.ReasonDemand) {
		*r = demandRun{}
		return
	}
	if r.ticks == 0 || p.Consumed < r.least {
		r.least = p.Consumed
	}
	r.allowed = math.Max(r.allowed, p.Rate)
	r.ticks++
}

// burstAt reports whether p ends a run that was an idle queue's: at least
// two ticks held by demand while the consumers took at most half of what
// they were allowed, then a tick not held (the consumers took their rate)
// at which they took at least twice the run's least and a quarter of its
// rate. A run held at nine tenths of the rate is no idle queue, and its end
// is no burst.
func (r *demandRun) burstAt(p history.Point) bool {
	if r.ticks < 2 || p.Reason == string(loop.ReasonDemand) || p.Reason == "" || p.Stale {
		return false
	}
	if !finite(p.Consumed) || !finite(r.least) || r.least > 0.5*r.allowed {
		return false
	}
	return p.Consumed >= 2*r.least && p.Consumed >= 0.25*r.allowed
}

// disturbance reports a disturbance starting or ending at points[i]: the
// signal's excess over its setpoint crossed the band (a tenth of the
// setpoint, at least 1) at i-1 and stayed beyond it at i, with the setpoint
// unchanged and the rate not moved the same way by more than a tenth over
// the window before, and no rate set by hand (mode manual) in it.
func disturbance(points []history.Point, i int) (Event, bool) {
	if i < window+1 {
		return Event{}, false
	}
	p := points[i]
	band := math.Max(1, 0.1*math.Abs(p.Setpoint))
	x := func(k int) float64 { return points[k].Measured - points[k].Setpoint }
	lo, hi := math.Inf(1), math.Inf(-1)
	for k := i - window; k <= i; k++ {
		// A setpoint edit or a rate set by hand explains the move.
		if points[k].Setpoint != p.Setpoint || points[k].Reason == string(loop.ReasonManual) || points[k].Mode == string(loop.ModeManual) {
			return Event{}, false
		}
		lo, hi = math.Min(lo, points[k].Rate), math.Max(hi, points[k].Rate)
	}
	base := points[i-window].Rate
	switch {
	case x(i) > band && x(i-1) > band && x(i-2) <= band && hi <= 1.1*base:
		return Event{p.T, Disturbance, fmt.Sprintf("disturbance: the signal rose to %s, %s above its %s setpoint, while the rate did not rise (%s msg/s)",
			num(p.Measured), num(x(i)), num(p.Setpoint), num(base))}, true
	case x(i) < -band && x(i-1) < -band && x(i-2) >= -band && lo >= base/1.1:
		return Event{p.T, DisturbanceOver, fmt.Sprintf("disturbance over: the signal fell to %s, %s below its %s setpoint, while the rate was not cut (%s msg/s)",
			num(p.Measured), num(-x(i)), num(p.Setpoint), num(base))}, true
	}
	return Event{}, false
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
