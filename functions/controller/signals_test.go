package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// A loop with several signals logs which one set the rate and each fresh
// measurement (a stale one, NaN, is left out: the line stays JSON).
func TestLogReportSignals(t *testing.T) {
	line := logLine(t, loop.Report{Loop: "orders", Outcome: loop.OutcomeApplied, Tick: 7, Limiting: "lag", Signals: []loop.SignalReport{{Name: "cpu", Measured: 55}, {Name: "lag", Measured: 11.5}, {Name: "p99", Measured: math.NaN(), Stale: true}}, MeasurementReport: loop.MeasurementReport{Measured: 55}, OutputReport: loop.OutputReport{Rate: 800}})
	sigs, _ := line["signals"].(map[string]any)
	if line["limiting"] != "lag" || sigs["lag"] != 11.5 || sigs["cpu"] != 55.0 || sigs["p99"] != nil {
		t.Fatalf("log line %v; want limiting lag and signals {cpu: 55, lag: 11.5}", line)
	}
}

// logLine logs r as the handler does and returns the line, decoded.
func logLine(t *testing.T, r loop.Report) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	h := &handler{log: slog.New(slog.NewJSONHandler(&buf, nil)), namespace: "SluiceTest"}
	h.logReport(context.Background(), events.EventBridgeEvent{ID: "e"}, r, time.Unix(1_800_000_000, 0))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	return line
}
