package why_test

import (
	"bytes"
	"context"
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
