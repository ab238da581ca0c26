package demo

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// TestIdleBurst runs the idle-burst world compressed (an idle queue for 25
// minutes, then 150,000 messages at once) on the production tick and
// consumer, with and without the consumers' report.
func TestIdleBurst(t *testing.T) {
	t.Parallel()
	s, err := sim.Preset(sim.PresetIdleBurst)
	if err != nil {
		t.Fatal(err)
	}
	s.Duration = 40 * time.Minute
	s.Bursts = []sim.Burst{{At: 25 * time.Minute, N: 150_000}}
	c, _, err := Tune(s)
	if err != nil {
		t.Fatal(err)
	}
	runWith := func(noReport bool) Result {
		res, err := Run(context.Background(), Config{Scenario: s, Params: DefaultParams(s, c), NoReport: noReport})
		if err != nil {
			t.Fatalf("Run(no report %v): %v", noReport, err)
		}
		if lost := res.Counts.Lost(); lost != 0 {
			t.Fatalf("Run(no report %v) lost %d", noReport, lost)
		}
		return res
	}
	with := runWith(false).Metrics
	if with.MaxCPU > s.Setpoint+5 || with.ViolationSeconds > 30 {
		t.Errorf("with the report: max CPU %.1f, %v s above sp+5; want at most %v and 30 s", with.MaxCPU, with.ViolationSeconds, s.Setpoint+5)
	}
	without := runWith(true).Metrics
	if without.ViolationSeconds <= 30 {
		t.Errorf("without the report: %v s above sp+5; want the failure the report fixes (more than 30 s)", without.ViolationSeconds)
	}
}

// The idle-burst world has no plant change: the production loop never says
// its model drifted, neither while the queue is empty (the consumers'
// report of what they stored, measured per tick from their leases, is the
// rate the prediction runs on) nor after the burst.
func TestIdleBurstNoModelDrift(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the idle-burst demo for 2 virtual hours")
	}
	s, err := sim.Preset(sim.PresetIdleBurst)
	if err != nil {
		t.Fatal(err)
	}
	r, err := driftRun(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if r.first >= 0 {
		t.Errorf("model_drift set at %v (%s, dead time %v, evidence %.1f) on an unchanged plant; want never",
			r.first, r.report.DriftReason, r.report.DriftDeadTime, r.report.DriftDeadTimeEvidence)
	}
}
