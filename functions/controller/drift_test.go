package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// A loop whose STATE says its model drifted logs a warning with the
// estimated gain ratio.
func TestLogReportModelDrift(t *testing.T) {
	var buf bytes.Buffer
	h := &handler{log: slog.New(slog.NewJSONHandler(&buf, nil)), namespace: "SluiceTest"}
	r := loop.Report{Loop: "orders", Outcome: loop.OutcomeApplied, Tick: 7, ModelDrift: true, DriftGainRatio: 2.02}
	h.logReport(context.Background(), events.EventBridgeEvent{ID: "e"}, r, time.Unix(1_800_000_000, 0))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	if line["level"] != "WARN" || line["model_drift"] != true || line["drift_gain_ratio"] != 2.02 {
		t.Fatalf("log line %v; want WARN with model_drift true and drift_gain_ratio 2.02", line)
	}
}
