package main

import (
	"testing"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// A loop whose STATE says its model drifted logs a warning with the
// estimated gain ratio.
func TestLogReportModelDrift(t *testing.T) {
	line := logLine(t, loop.Report{Loop: "orders", Outcome: loop.OutcomeApplied, Tick: 7, DriftReport: loop.DriftReport{ModelDrift: true, DriftGainRatio: 2.02}})
	if line["level"] != "WARN" || line["model_drift"] != true || line["drift_gain_ratio"] != 2.02 {
		t.Fatalf("log line %v; want WARN with model_drift true and drift_gain_ratio 2.02", line)
	}
}
