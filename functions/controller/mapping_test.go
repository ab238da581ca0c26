package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// A loop whose event source mapping could not be updated logs a warning
// that says the consumers keep pacing in the Lambda, publishes
// MappingUpdateFailed = 1 with the mapping's concurrency and target, and is
// named in the invocation's problems; its RATE was written.
func TestHandleMappingFailure(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	failed := loop.Report{Loop: "orders", Outcome: loop.OutcomeApplied, Tick: 9, Mapping: &loop.MappingReport{UUID: "esm-1", Concurrency: 10, Target: 25, Err: "AccessDeniedException", BatchSeconds: 0.5, BatchSize: 10}, OutputReport: loop.OutputReport{RateWritten: true, Rate: 400}, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 60}}
	updated := loop.Report{Loop: "payments", Outcome: loop.OutcomeApplied, Tick: 4, Mapping: &loop.MappingReport{UUID: "esm-2", Concurrency: 5, Target: 5, Updated: true, BatchSeconds: 0.5, BatchSize: 10}, OutputReport: loop.OutputReport{RateWritten: true, Rate: 80}, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 60}}
	worker := loop.Report{Loop: "worker", Outcome: loop.OutcomeApplied, Tick: 4, OutputReport: loop.OutputReport{RateWritten: true, Rate: 80}, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 60}}
	var buf bytes.Buffer
	h := &handler{ticker: fixedTicker{failed, updated, worker}, log: slog.New(slog.NewJSONHandler(&buf, nil)), namespace: "T", now: func() time.Time { return now }}
	res, err := h.handle(context.Background(), loadEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Problems["orders"]; !strings.Contains(p, "event source mapping") || !strings.Contains(p, "AccessDenied") || res.RateWrites != 3 {
		t.Errorf("problems %v, rate writes %d; want the mapping's failure named and every RATE written", res.Problems, res.RateWrites)
	}
	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines[m["Loop"].(string)] = m
	}
	o := lines["orders"]
	if o["level"] != "WARN" || o["mapping_error"] != "AccessDeniedException" || !strings.Contains(o["mapping_fallback"].(string), "pacing") ||
		o["MappingUpdateFailed"] != 1.0 || o["MappingConcurrency"] != 10.0 || o["MappingTarget"] != 25.0 {
		t.Errorf("orders line %v; want WARN, the error, the pacing note and the mapping metrics", o)
	}
	p := lines["payments"]
	if p["level"] != "INFO" || p["mapping_updated"] != true || p["MappingUpdateFailed"] != 0.0 || p["MappingConcurrency"] != 5.0 {
		t.Errorf("payments line %v; want INFO, updated, concurrency 5", p)
	}
	if w := lines["worker"]; w["MappingConcurrency"] != nil || w["mapping_target"] != nil {
		t.Errorf("worker line %v; want no mapping fields for a loop without a mapping", w)
	}
}
