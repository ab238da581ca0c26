package main

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/why"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/history"
)

// marks are the wall-clock times of the scenario's events, which `sluice
// why` must name from the loop's history: the phases' start, the
// disturbance's start and end, the setpoint edit and the burst.
type marks struct {
	phases, disturbance, disturbanceOff, edit, burst time.Time
}

// whyResult is what `sluice why` found in the loop's history: the ticks,
// how many had no reason, the events it named at the scenario's (each "at
// <offset from the scenario's event>: text", or what was found instead),
// and the events of those kinds it named elsewhere after the phases' start
// (Other: load from the machine's other tenants shows as a disturbance).
type whyResult struct {
	Ticks           int      `json:"ticks"`
	NoReason        int      `json:"ticks_without_reason"`
	Disturbance     string   `json:"disturbance"`
	DisturbanceOver string   `json:"disturbance_over"`
	Edit            string   `json:"setpoint_edit"`
	Burst           string   `json:"burst"`
	Edits           int      `json:"setpoint_edits"`
	Bursts          int      `json:"bursts"`
	Other           []string `json:"other_events,omitempty"`
	History         string   `json:"history_file,omitempty"`
	// Marks are the scenario's events, wall clock (the ticks' clock).
	Marks map[string]time.Time `json:"marks"`
}

// Windows, in ticks after the scenario's event, in which `sluice why` must
// name it. The controller reads a datapoint of one tick's period published
// at its end: a change of the CPU shows at a tick at most two ticks later.
// The disturbance then needs its test's ticks: on this noisy plant the
// rate cut, read as means over why.RateWindow ticks, is named at the
// latest when the last window lies wholly in the cut; the setpoint edit is
// read at the next tick; the burst shows in what the consumers took (their
// leases, refreshed every 2 s) at the next tick or, when it arrived late
// in a tick, the one after. Each window adds a tick of tolerance for a
// tick the scheduler ran late.
const (
	disturbanceTicks = 2 + why.RateWindow + 1
	editTicks        = 1 + 1
	burstTicks       = 2 + 1
)

// checkWhy reads the loop's HIST items, as `sluice why` does, and checks
// that every tick has a reason and that the events name the disturbance,
// the setpoint edit (20 -> 12, the only one) and the burst (the only one
// after the settled phase), each within its window after the scenario's.
func (r *run) checkWhy() {
	c := r.Cfg
	points, err := ddbhistory.New(r.ddb, r.table).Last(r.Ctx, r.loopID, 0)
	if err != nil {
		r.Fail("read the loop's history for sluice why: %v", err)
		return
	}
	res := &r.Res.Why
	res.Ticks = len(points)
	for _, p := range points {
		if p.Reason == "" {
			res.NoReason++
		}
	}
	if res.Ticks == 0 || res.NoReason > 0 {
		r.Fail("sluice why: %d of %d ticks have no reason code", res.NoReason, res.Ticks)
	}
	r.saveHistory(points)
	r.rateCut(points)
	m := r.marks
	res.Marks = map[string]time.Time{"phases": m.phases, "disturbance": m.disturbance, "disturbance_over": m.disturbanceOff,
		"setpoint_edit": m.edit, "burst": m.burst}
	events := why.Events(points)
	var ok [3]bool
	res.Disturbance, ok[0] = r.named(events, why.Disturbance, m.disturbance, disturbanceTicks)
	res.Edit, ok[1] = r.named(events, why.SetpointEdit, m.edit, editTicks)
	res.Burst, ok[2] = r.named(events, why.Burst, m.burst, burstTicks)
	res.DisturbanceOver, _ = r.named(events, why.DisturbanceOver, m.disturbanceOff, disturbanceTicks)
	for i, name := range []string{"disturbance", "setpoint edit", "burst"} {
		if !ok[i] {
			r.Fail("sluice why does not name the %s: %s", name, []string{res.Disturbance, res.Edit, res.Burst}[i])
		}
	}
	if want := fmt.Sprintf("%g -> %g", c.setpoint, c.setpoint2); ok[1] && !strings.Contains(res.Edit, want) {
		r.Fail("sluice why's setpoint edit %q: want %s", res.Edit, want)
	}
	res.Edits, res.Bursts, res.Other = r.others(events)
	if res.Edits != 1 {
		r.Fail("sluice why names %d setpoint edits after the phases' start; the scenario made one (%v)", res.Edits, res.Other)
	}
	if res.Bursts != 1 {
		r.Fail("sluice why names %d bursts after the settled phase; the scenario made one (%v)", res.Bursts, res.Other)
	}
	var out strings.Builder
	_ = why.Print(&out, r.loopID, points, 0)
	r.Logf("sluice why --loop %s -n 0:\n%s", r.loopID, out.String())
}

// named is the first event of kind at or after the scenario's event at
// (a tick may carry it at the same second): "at <offset>: text" and true
// when it lies within ticks ticks of at, else what was found instead.
func (r *run) named(events []why.Event, kind why.Kind, at time.Time, ticks int) (string, bool) {
	if at.IsZero() {
		return fmt.Sprintf("the scenario's %s did not happen (an earlier phase failed)", kind), false
	}
	hi := at.Add(time.Duration(ticks) * r.Cfg.Tick)
	for _, e := range events {
		if e.Kind != kind || e.T.Before(at.Add(-time.Second)) {
			continue
		}
		off := e.T.Sub(at).Round(time.Second)
		if e.T.After(hi) {
			return fmt.Sprintf("first %s %v after the scenario's, outside [0, %v]: %s", kind, off, hi.Sub(at), e.Text), false
		}
		return fmt.Sprintf("at %v: %s", off, e.Text), true
	}
	return fmt.Sprintf("no %s event after the scenario's", kind), false
}

// others counts the setpoint edits named after the phases' start and the
// bursts after the settled phase (the queue is never idle in between),
// and lists the disturbances, edits and bursts named outside the
// scenario's windows, with their offsets from the phases' start.
func (r *run) others(events []why.Event) (edits, bursts int, other []string) {
	m, c := r.marks, r.Cfg
	windows := map[why.Kind][2]time.Time{
		why.Disturbance:     {m.disturbance, m.disturbance.Add(disturbanceTicks * c.Tick)},
		why.DisturbanceOver: {m.disturbanceOff, m.disturbanceOff.Add(disturbanceTicks * c.Tick)},
		why.SetpointEdit:    {m.edit, m.edit.Add(editTicks * c.Tick)},
		why.Burst:           {m.burst, m.burst.Add(burstTicks * c.Tick)},
	}
	for _, e := range events {
		w, kept := windows[e.Kind]
		if !kept || e.T.Before(m.phases) {
			continue
		}
		switch {
		case e.Kind == why.SetpointEdit:
			edits++
		case e.Kind == why.Burst && !e.T.Before(m.phases.Add(c.phase)):
			bursts++
		}
		if e.T.Before(w[0].Add(-time.Second)) || e.T.After(w[1]) {
			other = append(other, fmt.Sprintf("%v: %s", e.T.Sub(m.phases).Round(time.Second), e.Text))
		}
	}
	return edits, bursts, other
}

// rateCut reports the allowed rate over the settled phase and over the
// disturbance's second half, and the share the controller cut: the
// disturbance's effect on the loop, which `sluice why` reads.
func (r *run) rateCut(points []history.Point) {
	m, p := r.marks, r.Cfg.phase
	mean := func(from, to time.Time) float64 {
		var s float64
		n := 0
		for _, pt := range points {
			if !pt.T.Before(from) && pt.T.Before(to) {
				s += pt.Rate
				n++
			}
		}
		return s / float64(n)
	}
	d := &r.Res.Disturb
	before, during := mean(m.phases.Add(p), m.disturbance), mean(m.disturbance.Add(p/2), m.disturbanceOff)
	if math.IsNaN(before) || math.IsNaN(during) {
		return
	}
	d.RateBefore, d.RateDisturbed, d.RateCut = e2ekit.Round(before, 2), e2ekit.Round(during, 2), e2ekit.Round(1-during/before, 3)
	r.Logf("the disturbance cut the allowed rate from %.2f to %.2f msg/s (%.0f %%; sluice why's rule: %.0f %%)",
		before, during, 100*d.RateCut, 100*why.RateCut)
}

// saveHistory writes the loop's history to the log directory, for `sluice
// why --history FILE`.
func (r *run) saveHistory(points []history.Point) {
	path := filepath.Join(r.Cfg.LogDir, "history-"+r.id+".json")
	f := history.File{Loop: r.loopID, TickS: r.Cfg.Tick.Seconds(), MetricPeriodS: r.Cfg.Tick.Seconds(), Points: points}
	if err := f.WriteFile(path); err != nil {
		r.Logf("history file: %v", err)
		return
	}
	r.Res.Why.History = path
}
