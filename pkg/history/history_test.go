package history_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

func TestFromReportFillsProcessedDepthAndLimited(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := loop.Report{Outcome: loop.OutcomeApplied, Setpoint: 70, Measured: 30, Rate: 1200,
		Processed: 400, ProcessedKnown: true, DemandLimited: true, Depth: 12, DepthKnown: true}
	p, ok := history.FromReport(at, r)
	if !ok || p.Consumed != 400 || p.Depth != 12 || !p.Limited {
		t.Fatalf("FromReport = %+v, %v; want consumed 400, depth 12, limited", p, ok)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back history.Point
	if err := json.Unmarshal(b, &back); err != nil || !back.Limited || back.Consumed != 400 {
		t.Errorf("round trip of %s = %+v, %v", b, back, err)
	}
	r.ProcessedKnown, r.DepthKnown, r.DemandLimited = false, false, false
	p, _ = history.FromReport(at, r)
	if !math.IsNaN(p.Consumed) || !math.IsNaN(p.Depth) || p.Limited {
		t.Errorf("FromReport without reports = %+v; want consumed and depth unknown (NaN)", p)
	}
}

// A loop with several signals: the point carries which signal limited and
// every signal's setpoint and measurement (null when stale), through JSON.
func TestFromReportSignals(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := loop.Report{Outcome: loop.OutcomeApplied, Setpoint: 70, Measured: 55, Rate: 800, Limiting: "lag",
		Signals: []loop.SignalReport{
			{Name: "cpu", Unit: "%", Setpoint: 70, Measured: 55, Rate: 900, Tracking: true},
			{Name: "lag", Unit: "s", Setpoint: 10, Measured: 12, Rate: 800, Stale: true},
		}}
	p, ok := history.FromReport(at, r)
	if !ok || p.Limiting != "lag" || len(p.Signals) != 2 || p.Signals[0].Measured != 55 || !math.IsNaN(p.Signals[1].Measured) {
		t.Fatalf("FromReport = %+v, %v", p, ok)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q history.Point
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if q.Limiting != "lag" || len(q.Signals) != 2 || q.Signals[1].Unit != "s" || q.Signals[1].Setpoint != 10 || !math.IsNaN(q.Signals[1].Measured) {
		t.Errorf("round trip %s = %+v", b, q)
	}
}
