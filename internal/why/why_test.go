package why_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/why"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// referencePoints runs the demo on the reference scenario, its events
// brought closer (a third of its length: disturbance at 15 min for 15 min,
// setpoint edit at 40 min, 60 min), and returns its history, one point per
// tick, and the run's start.
func referencePoints(t *testing.T) ([]history.Point, time.Time, sim.Scenario) {
	t.Helper()
	s := sim.Reference()
	s.Duration = 60 * time.Minute
	s.Disturbances[0].At, s.Disturbances[0].Duration = 15*time.Minute, 15*time.Minute
	s.SetpointChanges[0].At = 40 * time.Minute
	ctrl, _, err := demo.Tune(s)
	if err != nil {
		t.Fatal(err)
	}
	var points []history.Point
	cfg := demo.Config{Scenario: s, Params: demo.DefaultParams(s, ctrl), NoSeries: true, OnTick: func(tk demo.Tick) {
		for _, r := range tk.Reports {
			if p, ok := tk.Point(r); ok {
				points = append(points, p)
			}
		}
	}}
	if _, err := demo.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(points) == 0 {
		t.Fatal("the demo recorded no ticks")
	}
	return points, points[0].T, s
}

// TestEventsReferenceDemo: every tick of the (shortened) reference demo has a reason,
// and the events are the scenario's: the disturbance (and its end) and
// the setpoint edit, each found within the loop's dead time plus two ticks
// of when it happened, and nothing else.
func TestEventsReferenceDemo(t *testing.T) {
	points, start, s := referencePoints(t)
	for _, p := range points {
		if p.Reason == "" || p.ReasonText == "" {
			t.Fatalf("tick at %v has no reason: %+v", p.T.Sub(start), p)
		}
	}
	late := s.PipelineDelay() + s.Plant.DeadTime + 2*s.Tick
	d, c := s.Disturbances[0], s.SetpointChanges[0]
	want := []struct {
		kind why.Kind
		at   time.Duration
	}{{why.Disturbance, d.At}, {why.DisturbanceOver, d.At + d.Duration}, {why.SetpointEdit, c.At}}
	var got []why.Event
	for _, e := range why.Events(points) {
		if e.Kind != why.ReasonChange {
			got = append(got, e)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("events %+v; want %d (disturbance, its end, setpoint edit)", got, len(want))
	}
	for i, w := range want {
		at := got[i].T.Sub(start)
		if got[i].Kind != w.kind || at < w.at || at > w.at+late {
			t.Errorf("event %d = %s at %v (%q); want %s within [%v, %v]", i, got[i].Kind, at, got[i].Text, w.kind, w.at, w.at+late)
		}
	}
	if txt := got[2].Text; !strings.Contains(txt, "70 -> 50") {
		t.Errorf("setpoint edit = %q; want 70 -> 50", txt)
	}
}

// TestEventsBurst: a loop held by demand (an idle queue) that finds the
// consumers taking what it allows again shows a burst.
func TestEventsBurst(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var points []history.Point
	add := func(code loop.ReasonCode, consumed float64) {
		points = append(points, history.Point{T: t0.Add(time.Duration(len(points)) * time.Minute), Setpoint: 50, Measured: 20,
			Rate: 100, Consumed: consumed, Reason: string(code), ReasonText: string(code)})
	}
	add(loop.ReasonLimited, 100)
	add(loop.ReasonDemand, 0)
	add(loop.ReasonDemand, 0)
	add(loop.ReasonDemand, 0)
	add(loop.ReasonLimited, 98)
	var bursts []why.Event
	for _, e := range why.Events(points) {
		if e.Kind == why.Burst {
			bursts = append(bursts, e)
		}
	}
	if len(bursts) != 1 || !bursts[0].T.Equal(points[4].T) || !strings.Contains(bursts[0].Text, "3 ticks") {
		t.Errorf("bursts = %+v; want one at %v after 3 ticks held by demand", bursts, points[4].T)
	}
}

// A loop held by demand at nine tenths of its rate (consumers that take
// nearly all they are given, as at a start) and then limited again had no
// idle queue: its end is no burst.
func TestEventsNoBurstWithoutAnIdleQueue(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	var points []history.Point
	add := func(code loop.ReasonCode, rate, consumed float64) {
		points = append(points, history.Point{T: t0.Add(time.Duration(len(points)) * 5 * time.Second), Setpoint: 20, Measured: 15,
			Rate: rate, Consumed: consumed, Reason: string(code), ReasonText: string(code)})
	}
	add(loop.ReasonLimited, 17, 15)
	add(loop.ReasonDemand, 18.8, 16.7)
	add(loop.ReasonDemand, 18.8, 17.5)
	add(loop.ReasonLimited, 17, 18)
	for _, e := range why.Events(points) {
		if e.Kind == why.Burst {
			t.Errorf("event %+v; want no burst after a run held at nine tenths of the rate", e)
		}
	}
}

func TestPrint(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	points := []history.Point{
		{T: t0, Setpoint: 70, Measured: 60, Rate: 400, Reason: "limited", ReasonText: "set by cpu: 60 % below its 70 % setpoint"},
		{T: t0.Add(time.Minute), Setpoint: 70, Measured: 60, Rate: 500, Reason: "max_rate", ReasonText: "max_rate: at 500 msg/s"},
	}
	var out bytes.Buffer
	if err := why.Print(&out, "orders", points, 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"loop orders: 1 ticks", "max_rate: at 500 msg/s", "reason: limited -> max_rate",
		"now: max_rate: at 500 msg/s", "what would change it: the signal has room: a higher max_rate (sluice params set --loop orders max_rate=N)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Print wrote\n%s\nwant it to contain %q", out.String(), want)
		}
	}
	if strings.Contains(out.String(), "set by cpu") {
		t.Errorf("Print -n 1 wrote the tick before the last:\n%s", out.String())
	}
}

// fastLoop builds the history of a loop on 5-s ticks (the e2e's), whose
// consumers' rate the controller averages over 30 s as it does
// (loop.ProcessedSmoothing): add appends a tick with the raw rate the
// consumers took since the last one.
type fastLoop struct {
	t0     time.Time
	points []history.Point
	avg    float64
}

func (l *fastLoop) add(code loop.ReasonCode, setpoint, measured, rate, took float64) {
	n := len(l.points)
	if n == 0 {
		l.avg = took
	} else {
		a := math.Exp(-5.0 / 30)
		l.avg = a*l.avg + (1-a)*took
	}
	l.points = append(l.points, history.Point{T: l.t0.Add(time.Duration(n) * 5 * time.Second), Setpoint: setpoint, Measured: measured,
		Rate: rate, Consumed: l.avg, ConsumedSmoothing: 30 * time.Second, Reason: string(code), ReasonText: string(code)})
}

func kinds(events []why.Event, k why.Kind) []why.Event {
	var out []why.Event
	for _, e := range events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// steady is a settled loop: the rate wobbles by up to 8 % around 13 msg/s,
// the signal by up to 1.5 points around its 20 % setpoint.
func (l *fastLoop) steady(ticks int) {
	wobble := []float64{0, 0.08, -0.05, 0.03, -0.08, 0.05}
	for k := 0; k < ticks; k++ {
		r := 13 * (1 + wobble[k%len(wobble)])
		l.add(loop.ReasonLimited, 20, 20+1.5*wobble[(k+2)%len(wobble)]/0.08, r, r)
	}
}

// TestEventsDisturbanceByTheRateCut: on a fast loop the controller cuts the
// rate within a tick of seeing load from elsewhere, so the signal is above
// its setpoint for one tick only; the disturbance shows in the rate, cut by
// half while the consumers kept taking what they were allowed, and its end
// in the rate's return.
func TestEventsDisturbanceByTheRateCut(t *testing.T) {
	l := &fastLoop{t0: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	l.steady(12)
	l.add(loop.ReasonLimited, 20, 25, 13, 13) // 12: the load arrives
	for k, r := range []float64{10, 8, 7, 6.5, 6.5, 6.6, 6.4, 6.5} {
		l.add(loop.ReasonLimited, 20, []float64{21, 20.5, 20, 19.8, 20.2, 20, 19.9, 20.1}[k], r, r) // 13..20
	}
	l.add(loop.ReasonLimited, 20, 15, 6.5, 6.5) // 21: the load leaves
	for _, r := range []float64{9, 11.5, 13, 13, 13, 13, 13, 13, 13} {
		l.add(loop.ReasonLimited, 20, 19.5, r, r) // 22..30
	}
	events := why.Events(l.points)
	d, over := kinds(events, why.Disturbance), kinds(events, why.DisturbanceOver)
	// The rule reads means over RateWindow ticks: it names the cut (from
	// tick 13) at the latest when the last window lies wholly in it.
	within := func(e why.Event, from, to int) bool {
		return !e.T.Before(l.points[from].T) && !e.T.After(l.points[to].T)
	}
	if len(d) != 1 || !within(d[0], 13, 12+why.RateWindow) {
		t.Errorf("disturbances %+v; want one within ticks 13..%d", d, 12+why.RateWindow)
	}
	if len(over) != 1 || !within(over[0], 22, 21+why.RateWindow) {
		t.Errorf("disturbances over %+v; want one within ticks 22..%d", over, 21+why.RateWindow)
	}
}

// noisy are the allowed rates of the e2e's loop over a settled phase on
// MariaDB (5-s ticks, 20 % setpoint): a loop whose rate moves by up to a
// half from one tick to the next.
var noisy = []float64{11, 12.2, 8.7, 10.8, 9.25, 6.44, 6.9, 10.3, 11, 4.54, 10.2, 8.62, 6.77, 12.4, 9.97, 9.94, 8.7, 8.66, 8.66, 8.66}

// A disturbance that takes 60 % of the loop's CPU on that noisy loop is
// named within the rule's window, and the noise before it is not.
func TestEventsDisturbanceOnANoisyLoop(t *testing.T) {
	l := &fastLoop{t0: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	for k, r := range append(noisy, noisy...) {
		l.add(loop.ReasonLimited, 20, 20+8*(r-9.2)/9.2*float64(1-2*(k%2)), r, r)
	}
	at := len(l.points)
	for k, r := range noisy[:10] {
		l.add(loop.ReasonLimited, 20, 22-float64(k%3), 0.4*r, 0.4*r)
	}
	d := kinds(why.Events(l.points), why.Disturbance)
	if len(d) != 1 || d[0].T.Before(l.points[at].T) || d[0].T.After(l.points[at+why.RateWindow-1].T) {
		t.Errorf("disturbances %+v; want one within ticks %d..%d", d, at, at+why.RateWindow-1)
	}
}

// A settled loop whose rate and signal wobble, a signal that moves because
// the consumers take more (a burst) or less (the queue runs dry), a rate
// cut by the consumers' demand (they took less), a rate cut by a setpoint
// edit and a start-up that overshoots and is cut back show no disturbance
// and no end of one.
func TestEventsNoDisturbanceWithoutLoadFromElsewhere(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	cases := map[string]func(l *fastLoop){
		"wobble": func(l *fastLoop) { l.steady(60) },
		"noisy": func(l *fastLoop) {
			for k := 0; k < 3; k++ {
				for j, r := range noisy {
					l.add(loop.ReasonLimited, 20, 20+float64(j%5-2), r, r)
				}
			}
		},
		"noisy signal": func(l *fastLoop) { // a steady rate, a signal that wanders by 3 points either way
			for j := 0; j < 60; j++ {
				l.add(loop.ReasonLimited, 12, 12+[]float64{-3, 1.5, 2.5, -2, 3, 2, -1.5, 2.5, 3.5, 4}[j%10], 10+0.3*float64(j%3), 10)
			}
		},
		"noisy spike": func(l *fastLoop) { // the signal beyond its band at two ticks: the rate's moves explain it
			for j, r := range append(noisy, noisy...) {
				m := 20 + float64(j%5-2)
				if j == 37 || j == 38 {
					m = 25
				}
				l.add(loop.ReasonLimited, 20, m, r, r)
			}
		},
		"burst after idle": func(l *fastLoop) { // the signal rises because the consumers take more
			l.steady(6)
			for k := 0; k < 10; k++ {
				l.add(loop.ReasonDemand, 20, 0.5, 10, 0)
			}
			for _, m := range []float64{26, 27, 25, 24, 22} {
				l.add(loop.ReasonDemand, 20, m, 10, 10)
			}
		},
		"cut after a burst": func(l *fastLoop) { // the rate held over an idle queue, then cut as the burst loads the signal
			l.steady(6)
			for k := 0; k < 8; k++ {
				l.add(loop.ReasonDemand, 12, 0.5, 10.3, 0)
			}
			for _, r := range []float64{10.3, 7, 6, 6.5, 6.8, 6.2, 6.6, 6.4} {
				l.add(loop.ReasonLimited, 12, 13, r, r)
			}
		},
		"queue runs dry": func(l *fastLoop) { // the signal falls because the consumers take less
			for k := 0; k < 12; k++ {
				l.add(loop.ReasonLimited, 20, 20, 13, 13)
			}
			for _, took := range []float64{4, 0, 0, 0, 0, 0, 0} {
				l.add(loop.ReasonDemand, 20, 2, 13, took)
			}
		},
		"demand": func(l *fastLoop) {
			l.steady(12)
			for _, took := range []float64{8, 5, 4, 4, 4, 4} {
				l.add(loop.ReasonDemand, 20, 10, took*1.5, took)
			}
		},
		"setpoint edit": func(l *fastLoop) {
			l.steady(12)
			for _, r := range []float64{10, 8, 7, 7, 7, 7, 7, 7} {
				l.add(loop.ReasonLimited, 12, 13, r, r)
			}
		},
		"start-up overshoot": func(l *fastLoop) {
			for _, r := range []float64{3, 6, 9, 12, 15, 16, 11, 10, 12, 13, 13, 13, 13, 13} {
				l.add(loop.ReasonLimited, 20, 20+(r-13)/1.5, r, r)
			}
		},
	}
	for name, build := range cases {
		l := &fastLoop{t0: t0}
		build(l)
		events := why.Events(l.points)
		if d := append(kinds(events, why.Disturbance), kinds(events, why.DisturbanceOver)...); len(d) > 0 {
			t.Errorf("%s: disturbances %+v; want none", name, d)
		}
	}
}

// TestEventsBurstThroughTheAverage: the queue empties and idles (the
// consumers take nothing; the controller holds the rate by demand), then a
// burst arrives. The controller's average of what the consumers took rises
// over 30 s, so the tick stays held by demand for several ticks more; the
// burst is named at the first tick the consumers took what they were
// allowed, not when the reason changes.
func TestEventsBurstThroughTheAverage(t *testing.T) {
	l := &fastLoop{t0: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	l.steady(6)
	for _, took := range []float64{9, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0} { // 6..16: the queue empties and idles
		l.add(loop.ReasonDemand, 12, 5, 4.6, took)
	}
	l.add(loop.ReasonDemand, 12, 6, 4.6, 2.1) // 17: the burst arrives mid-tick
	l.add(loop.ReasonDemand, 12, 9, 4.6, 4.6) // 18
	for k := 0; k < 4; k++ {
		l.add(loop.ReasonDemand, 12, 10, 4.6+float64(k), 4.6+float64(k))
	}
	l.add(loop.ReasonLimited, 12, 11, 9, 9)
	b := kinds(why.Events(l.points), why.Burst)
	if len(b) != 1 || !b[0].T.Equal(l.points[18].T) {
		t.Errorf("bursts %+v; want one at tick 18 (%v), the first the consumers took half of what they were allowed", b, l.points[18].T)
	}
}

// Counts that arrive in lumps (a tick with nothing, the next with two
// ticks' worth) on a queue with a backlog are no idle queue and no burst.
func TestEventsNoBurstFromLumpyCounts(t *testing.T) {
	l := &fastLoop{t0: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	for k := 0; k < 40; k++ {
		took := 0.0
		if k%3 == 2 {
			took = 39
		}
		l.add(loop.ReasonLimited, 20, 20, 13, took)
	}
	if b := kinds(why.Events(l.points), why.Burst); len(b) > 0 {
		t.Errorf("bursts %+v; want none", b)
	}
}

// TestEventsE2EHistory replays the histories of two `make e2e` runs on
// MariaDB (testdata: their HIST items and the wall-clock times of their
// scenario's events): sluice why names the disturbance, its end, the
// setpoint edit and the burst each within its window after the scenario's
// event (the e2e's: the metric's two ticks, the rule's ticks, one of
// tolerance), and no other event of those kinds after the phases' start.
// In the second run ("e2e-drain"), while the consumers drained the burst
// at the minimum rate on a busy machine, two 5-s ticks counted nothing
// (the 30-s average fell from 4.02 to 2.88 msg/s of 3.7 allowed): no
// idle queue, so no second burst.
func TestEventsE2EHistory(t *testing.T) {
	for _, run := range []string{"e2e", "e2e-drain"} {
		t.Run(run, func(t *testing.T) { checkE2EHistory(t, "testdata/"+run) })
	}
}

func checkE2EHistory(t *testing.T, prefix string) {
	f, err := history.ReadFile(prefix+"-history.json", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(prefix + "-marks.json")
	if err != nil {
		t.Fatal(err)
	}
	var marks map[string]time.Time
	if err := json.Unmarshal(b, &marks); err != nil {
		t.Fatal(err)
	}
	tick := 5 * time.Second
	want := map[why.Kind]struct {
		at    time.Time
		ticks int
	}{
		why.Disturbance:     {marks["disturbance"], 2 + why.RateWindow + 1},
		why.DisturbanceOver: {marks["disturbance_over"], 2 + why.RateWindow + 1},
		why.SetpointEdit:    {marks["setpoint_edit"], 2},
		why.Burst:           {marks["burst"], 3},
	}
	got := map[why.Kind]int{}
	for _, e := range why.Events(f.Points) {
		w, ok := want[e.Kind]
		if !ok || e.T.Before(marks["phases"]) {
			continue
		}
		got[e.Kind]++
		if e.T.Before(w.at.Add(-time.Second)) || e.T.After(w.at.Add(time.Duration(w.ticks)*tick)) {
			t.Errorf("%s at %v after the scenario's (%q); want within %d ticks", e.Kind, e.T.Sub(w.at).Round(time.Second), e.Text, w.ticks)
		}
	}
	for k := range want {
		if got[k] != 1 {
			t.Errorf("%d events %q after the phases' start; want 1", got[k], k)
		}
	}
}
