package history_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

func TestFromReportFillsProcessedDepthAndLimited(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := loop.Report{Outcome: loop.OutcomeApplied, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 30}, OutputReport: loop.OutputReport{Rate: 1200}, DemandReport: loop.DemandReport{Processed: 400, ProcessedKnown: true, DemandLimited: true, Depth: 12, DepthKnown: true}}
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

// The consumers' inner loop: the point carries their latency, its
// reference and the rate their cut withheld, through JSON; a point without
// them carries none.
func TestFromReportInnerLoop(t *testing.T) {
	at := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	r := loop.Report{Outcome: loop.OutcomeApplied, DemandReport: loop.DemandReport{Processed: 40, ProcessedKnown: true,
		Withheld: 12.5, InnerLatency: 30 * time.Millisecond, InnerReference: 20 * time.Millisecond}}
	p, _ := history.FromReport(at, r)
	if p.InnerLatency != 30*time.Millisecond || p.InnerReference != 20*time.Millisecond || p.Withheld != 12.5 {
		t.Fatalf("FromReport = %+v; want latency 30ms, reference 20ms, withheld 12.5", p)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"inner_latency_ms":30`) || !strings.Contains(string(b), `"inner_reference_ms":20`) {
		t.Errorf("JSON %s: want inner_latency_ms 30 and inner_reference_ms 20", b)
	}
	var back history.Point
	if err := json.Unmarshal(b, &back); err != nil || (back.InnerLatency != p.InnerLatency || back.InnerReference != p.InnerReference || back.Withheld != p.Withheld) {
		t.Errorf("round trip of %s = %+v, %v", b, back, err)
	}
	p, _ = history.FromReport(at, loop.Report{Outcome: loop.OutcomeApplied})
	if b, _ := json.Marshal(p); strings.Contains(string(b), "inner_") || strings.Contains(string(b), "withheld") {
		t.Errorf("JSON without an inner loop %s: want no inner_ or withheld field", b)
	}
}

// A loop with several signals: the point carries which signal limited and
// every signal's setpoint and measurement (null when stale), through JSON.
func TestFromReportSignals(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := loop.Report{Outcome: loop.OutcomeApplied, Limiting: "lag", Signals: []loop.SignalReport{
		{Name: "cpu", Unit: "%", Setpoint: 70, Measured: 55, Rate: 900, Tracking: true},
		{Name: "lag", Unit: "s", Setpoint: 10, Measured: 12, Rate: 800, Stale: true},
	}, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 55}, OutputReport: loop.OutputReport{Rate: 800}}
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

// The controller's consumed rate is its exponential average: the point says
// so, on the wire too; a point without the mark (an old item, a raw rate)
// reads as raw.
func TestFromReportMarksConsumedSmoothing(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p, _ := history.FromReport(at, loop.Report{Outcome: loop.OutcomeApplied, DemandReport: loop.DemandReport{Processed: 7, ProcessedKnown: true}})
	if p.ConsumedSmoothing != loop.ProcessedSmoothing {
		t.Fatalf("ConsumedSmoothing = %v; want loop.ProcessedSmoothing", p.ConsumedSmoothing)
	}
	b, _ := json.Marshal(p)
	var back history.Point
	if err := json.Unmarshal(b, &back); err != nil || back.ConsumedSmoothing != loop.ProcessedSmoothing {
		t.Fatalf("round trip of %s = %+v, %v", b, back, err)
	}
	var old history.Point
	if err := json.Unmarshal([]byte(`{"t":0,"consumed":5}`), &old); err != nil || old.ConsumedSmoothing != 0 {
		t.Fatalf("old point = %+v, %v; want ConsumedSmoothing 0", old, err)
	}
	p.ConsumedSmoothing = 0
	if b, _ := json.Marshal(p); strings.Contains(string(b), "consumed_smoothing") {
		t.Errorf("raw point = %s; want no consumed_smoothing_s", b)
	}
}

// RawConsumed undoes the exponential average exactly, keeps a point that
// restarts the average (the previous rate unknown) and raw points, and
// leaves its argument alone.
func TestRawConsumed(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	raw := []float64{4, 4, 10, 10, 2, math.NaN(), 6, 8}
	var pts []history.Point
	avg, known := 0.0, false
	for k, r := range raw {
		tk := t0.Add(time.Duration(5*k) * time.Second)
		switch {
		case math.IsNaN(r):
			known = false
		case known:
			a := math.Exp(-5.0 / 30)
			avg = a*avg + (1-a)*r
		default:
			avg, known = r, true
		}
		c := avg
		if !known {
			c = math.NaN()
		}
		pts = append(pts, history.Point{T: tk, Consumed: c, ConsumedSmoothing: 30 * time.Second})
	}
	pts = append(pts, history.Point{T: t0.Add(40 * time.Second), Consumed: 3}) // raw
	got := history.RawConsumed(pts)
	want := append(raw, 3)
	for i := range want {
		if !(math.Abs(got[i].Consumed-want[i]) < 1e-9 || math.IsNaN(want[i]) && math.IsNaN(got[i].Consumed)) {
			t.Errorf("point %d: consumed %v; want %v", i, got[i].Consumed, want[i])
		}
		if got[i].ConsumedSmoothing != 0 {
			t.Errorf("point %d: still marked smoothed", i)
		}
	}
	if pts[2].ConsumedSmoothing == 0 || pts[2].Consumed == 10 {
		t.Error("RawConsumed changed its argument")
	}
}

// A tick whose STATE says the model drifted marks its point, on the wire
// as model_drift, and only then.
func TestPointModelDrift(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p, ok := history.FromReport(at, loop.Report{Outcome: loop.OutcomeApplied, MeasurementReport: loop.MeasurementReport{Measured: 60}, DriftReport: loop.DriftReport{ModelDrift: true}})
	if !ok || !p.ModelDrift {
		t.Fatalf("FromReport with model drift = %+v, %v; want ModelDrift", p, ok)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back history.Point
	if err := json.Unmarshal(b, &back); err != nil || !back.ModelDrift || !strings.Contains(string(b), `"model_drift":true`) {
		t.Fatalf("round trip of %s = %+v, %v; want model_drift true", b, back, err)
	}
	p.ModelDrift = false
	if b, _ := json.Marshal(p); strings.Contains(string(b), "model_drift") {
		t.Fatalf("point without drift = %s; want no model_drift", b)
	}
}
