// Package historytest is the contract suite of a loop history: every
// implementation (ddbhistory's Store on DynamoDB, its Memory, yours) runs
// Run, the way testing/slogtest checks a slog.Handler.
package historytest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// Store is what the suite exercises: a history's readers (the dashboard's)
// and its writers (the controller's).
type Store interface {
	// Last returns the newest n points of the loop, oldest first.
	Last(ctx context.Context, loopID string, n int) ([]history.Point, error)
	// Since returns at most n points after t (exclusive), oldest first.
	Since(ctx context.Context, loopID string, t time.Time, n int) ([]history.Point, error)
	// Append adds a point to the loop's history.
	Append(ctx context.Context, loopID string, p history.Point) error
	// AppendReports appends the points of one controller tick at t.
	AppendReports(ctx context.Context, t time.Time, reports []loop.Report) error
}

// Point returns the k-th point of the suite's histories, k minutes after
// t0: every field set, some NaN, some with signals.
func Point(t0 time.Time, k int) history.Point {
	p := history.Point{
		T: t0.Add(time.Duration(k) * time.Minute), Setpoint: 70, Measured: 60 + float64(k),
		Rate: 1000 + float64(k), Consumed: 990 + float64(k), P: float64(k), I: -float64(k), FF: 1200,
		Saturated: k%3 == 0, Stale: k%4 == 0, Depth: 5000 - float64(k), Mode: "auto", ModelDrift: k%5 == 1,
	}
	if k%2 == 0 {
		p.ConsumedSmoothing = loop.ProcessedSmoothing
	}
	if k%3 != 2 { // a point stored before reasons were kept has none
		p.Reason, p.ReasonText = string(loop.ReasonLimited), fmt.Sprintf("limited by cpu: %d %% above its 70 %% setpoint", 60+k)
	}
	if p.Stale {
		p.Measured = math.NaN()
	}
	if k%3 == 1 { // consumers that run an inner loop
		p.InnerLatency, p.InnerReference, p.Withheld = time.Duration(30+k)*time.Millisecond, 25*time.Millisecond, float64(k)/2
	}
	if k%2 == 1 {
		p.Limiting = "lag"
		p.Signals = []history.SignalPoint{{Name: "cpu", Unit: "%", Setpoint: 70, Measured: p.Measured}, {Name: "lag", Unit: "s", Setpoint: 10, Measured: math.NaN()}}
	}
	return p
}

// Same reports whether two points are equal, NaN equal to NaN and times
// by instant.
func Same(a, b history.Point) bool {
	eq := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	return a.T.Equal(b.T) && eq(a.Setpoint, b.Setpoint) && eq(a.Measured, b.Measured) && eq(a.Rate, b.Rate) &&
		eq(a.Consumed, b.Consumed) && a.ConsumedSmoothing == b.ConsumedSmoothing && eq(a.P, b.P) && eq(a.I, b.I) && eq(a.FF, b.FF) &&
		a.Saturated == b.Saturated && a.Stale == b.Stale && eq(a.Depth, b.Depth) && a.Mode == b.Mode &&
		a.ModelDrift == b.ModelDrift && a.Limiting == b.Limiting && a.Reason == b.Reason && a.ReasonText == b.ReasonText &&
		a.InnerLatency == b.InnerLatency && a.InnerReference == b.InnerReference && a.Withheld == b.Withheld &&
		len(a.Signals) == len(b.Signals) &&
		!slices.ContainsFunc(a.Signals, func(s history.SignalPoint) bool {
			i := slices.IndexFunc(b.Signals, func(t history.SignalPoint) bool { return t.Name == s.Name })
			return i < 0 || b.Signals[i].Unit != s.Unit || !eq(b.Signals[i].Setpoint, s.Setpoint) || !eq(b.Signals[i].Measured, s.Measured)
		})
}

// Run runs the suite on histories newHistory returns, a fresh one for each
// case: Last and Since return the newest or following points oldest
// first, one point per tick (the later append wins), AppendReports
// records applied ticks only, an unknown loop is empty.
func Run(t *testing.T, newHistory func(t *testing.T) Store) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, h Store)
	}{
		{"Last returns the newest points oldest first", last},
		{"Since is exclusive and bounded", since},
		{"same tick overwrites", sameTick},
		{"AppendReports records applied ticks only", appendReports},
		{"unknown loop is empty", unknownLoop},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, newHistory(t)) })
	}
}

// t0 is the time of the suite's first point.
var t0 = time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)

func last(t *testing.T, h Store) {
	ctx := context.Background()
	for k := range 10 {
		if err := h.Append(ctx, "a", Point(t0, k)); err != nil {
			t.Fatalf("Append(%d) = %v", k, err)
		}
	}
	_ = h.Append(ctx, "b", Point(t0, 100))
	got, err := h.Last(ctx, "a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Last(a, 3) returned %d points; want 3", len(got))
	}
	for i, k := range []int{7, 8, 9} {
		if want := Point(t0, k); !Same(got[i], want) {
			t.Errorf("Last(a, 3)[%d] = %+v; want %+v", i, got[i], want)
		}
	}
}

func since(t *testing.T, h Store) {
	ctx := context.Background()
	for k := range 10 {
		_ = h.Append(ctx, "a", Point(t0, k))
	}
	got, err := h.Since(ctx, "a", Point(t0, 4).T, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !Same(got[0], Point(t0, 5)) || !Same(got[1], Point(t0, 6)) {
		t.Fatalf("Since(t4, 2) = %+v; want points 5 and 6", got)
	}
	all, _ := h.Since(ctx, "a", time.Time{}, 0)
	if len(all) != 10 {
		t.Errorf("Since(zero, 0) returned %d points; want 10", len(all))
	}
	none, _ := h.Since(ctx, "a", Point(t0, 9).T, 5)
	if len(none) != 0 {
		t.Errorf("Since(last) returned %d points; want 0", len(none))
	}
}

func sameTick(t *testing.T, h Store) {
	ctx := context.Background()
	p := Point(t0, 1)
	_ = h.Append(ctx, "a", p)
	p.Rate = 42
	_ = h.Append(ctx, "a", p)
	got, _ := h.Last(ctx, "a", 10)
	if len(got) != 1 || got[0].Rate != 42 {
		t.Fatalf("after two appends at one tick Last = %+v; want one point with rate 42", got)
	}
}

func appendReports(t *testing.T, h Store) {
	ctx := context.Background()
	reports := []loop.Report{
		{Loop: "a", Outcome: loop.OutcomeApplied, Mode: loop.ModeAuto, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 65}, OutputReport: loop.OutputReport{Rate: 900, P: 5, I: 30, FF: 865, Saturated: true}},
		{Loop: "b", Outcome: loop.OutcomeApplied, Mode: loop.ModeShadow, MeasurementReport: loop.MeasurementReport{Setpoint: 60, Measured: math.NaN(), Stale: true}, OutputReport: loop.OutputReport{Rate: 200}},
		{Loop: "c", Outcome: loop.OutcomeLost, MeasurementReport: loop.MeasurementReport{Setpoint: 60, Measured: 50}, OutputReport: loop.OutputReport{Rate: 300}},
		{Loop: "d", Outcome: loop.OutcomeError, MeasurementReport: loop.MeasurementReport{Measured: math.NaN()}},
	}
	for i := range 30 { // more than one BatchWriteItem
		reports = append(reports, loop.Report{Loop: fmt.Sprintf("bulk-%02d", i), Outcome: loop.OutcomeApplied, MeasurementReport: loop.MeasurementReport{Setpoint: 50, Measured: 50}, OutputReport: loop.OutputReport{Rate: float64(i)}})
	}
	if err := h.AppendReports(ctx, t0, reports); err != nil {
		t.Fatalf("AppendReports = %v", err)
	}
	nan := math.NaN()
	for _, tt := range []struct {
		loop string
		want []history.Point
	}{
		{"a", []history.Point{{T: t0, Setpoint: 70, Measured: 65, Rate: 900, Consumed: nan, P: 5, I: 30, FF: 865, Saturated: true, Depth: nan, Mode: "auto"}}},
		{"b", []history.Point{{T: t0, Setpoint: 60, Measured: nan, Rate: 200, Consumed: nan, P: nan, I: nan, FF: nan, Stale: true, Depth: nan, Mode: "shadow"}}},
		{"c", nil},
		{"d", nil},
		{"bulk-29", []history.Point{{T: t0, Setpoint: 50, Measured: 50, Rate: 29, Consumed: nan, Depth: nan}}},
	} {
		got, err := h.Last(ctx, tt.loop, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) {
			t.Errorf("Last(%s) = %d points; want %d", tt.loop, len(got), len(tt.want))
			continue
		}
		for i := range got {
			if !Same(got[i], tt.want[i]) {
				t.Errorf("Last(%s)[%d] = %+v; want %+v", tt.loop, i, got[i], tt.want[i])
			}
		}
	}
}

func unknownLoop(t *testing.T, h Store) {
	ctx := context.Background()
	got, err := h.Last(ctx, "nope", 5)
	if err != nil || len(got) != 0 {
		t.Fatalf("Last(nope) = %v, %v; want empty, nil", got, err)
	}
}
