package loop

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

func TestExplain(t *testing.T) {
	base := Params{Mode: ModeAuto, MinRate: 10, MaxRate: 2000, SlewLimit: 100, ManualRate: 300}
	cpu := SignalReport{Name: "cpu", Unit: "%", Setpoint: 70, Measured: 72.4}
	with := func(f func(*reasonInput)) reasonInput {
		in := reasonInput{p: base, sig: cpu, out: control.Output{Rate: 500}, prevRate: 520, processed: 310}
		f(&in)
		return in
	}
	tests := []struct {
		name string
		in   reasonInput
		code ReasonCode
		text string
	}{
		{"above its setpoint", with(func(*reasonInput) {}), ReasonLimited, "limited by cpu: 72.4 % above its 70 % setpoint"},
		{"below its setpoint", with(func(in *reasonInput) { in.sig.Measured = 50 }), ReasonLimited, "set by cpu: 50 % below its 70 % setpoint"},
		{"at its setpoint", with(func(in *reasonInput) { in.sig.Measured = 70.3 }), ReasonLimited, "limited by cpu: 70.3 % at its 70 % setpoint"},
		{"manual", with(func(in *reasonInput) { in.p.Mode, in.out.Rate = ModeManual, 300 }), ReasonManual, "manual: rate set by hand to 300 msg/s"},
		{"experiment", with(func(in *reasonInput) {
			in.experiment = &ExperimentState{ID: "x1", Status: ExperimentRunning, Setpoint: 65}
		}), ReasonExperiment, "experiment x1: setpoint 70 % in force (65 % before), rate 500 msg/s"},
		{"stale", with(func(in *reasonInput) {
			in.sig.Stale, in.p.Stale.Action = true, control.StaleHold
		}), ReasonStale, "stale: hold: cpu has no fresh datapoint, rate 500 msg/s"},
		{"resumed", with(func(in *reasonInput) { in.resumed = true }), ReasonResumed, "resumed: cpu fresh again at 72.4 %, continuing from 500 msg/s"},
		{"ceiling", with(func(in *reasonInput) { in.out.Cut, in.sig.Measured = true, 100 }), ReasonCeiling, "ceiling: cpu at 100 %, at or above its ceiling: rate cut to 500 msg/s"},
		{"demand", with(func(in *reasonInput) { in.out.DemandLimited, in.prevRate = true, 420 }), ReasonDemand, "held by demand: consumers took 310 of 420 msg/s"},
		{"demand, integrator held", with(func(in *reasonInput) {
			in.out.ActualLimited, in.processedKnown, in.processed, in.prevRate, in.sig.Measured = true, true, 0, 4.27, 0
		}), ReasonDemand, "held by demand: consumers took 0 of 4.27 msg/s"},
		{"max_rate", with(func(in *reasonInput) { in.out.Rate, in.sig.Measured = 2000, 40 }), ReasonMaxRate, "max_rate: at 2000 msg/s; cpu: 40 % below its 70 % setpoint"},
		{"min_rate", with(func(in *reasonInput) { in.out.Rate, in.sig.Measured = 10, 95 }), ReasonMinRate, "min_rate: at 10 msg/s; cpu: 95 % above its 70 % setpoint"},
		{"slew", with(func(in *reasonInput) { in.out.Saturated, in.sig.Measured, in.prevRate = true, 50, 400 }), ReasonSlew,
			"slew limit: from 400 msg/s to 500 msg/s, at most 100 per tick; cpu: 50 % below its 70 % setpoint"},
		{"no datapoint", with(func(in *reasonInput) { in.sig.Measured = math.NaN() }), ReasonLimited, "limited by cpu: no datapoint yet, setpoint 70 %"},
		{"shadow", with(func(in *reasonInput) { in.p.Mode = ModeShadow }), ReasonLimited, "limited by cpu: 72.4 % above its 70 % setpoint (shadow: RATE not written)"},
		{"backlog that matters", with(func(in *reasonInput) {
			in.depth, in.depthKnown, in.processedKnown, in.processed = 1.2e6, true, true, 80
			in.out.Rate = 105
		}), ReasonLimited, "limited by cpu: 72.4 % above its 70 % setpoint; backlog 1.2e+06 drains in 3 h 10 m at the allowed 105 msg/s (4 h 10 m at the processed 80 msg/s)"},
		{"backlog that drains soon", with(func(in *reasonInput) { in.depth, in.depthKnown = 3000, true }), ReasonLimited,
			"limited by cpu: 72.4 % above its 70 % setpoint"},
		{"oldest message expires first", with(func(in *reasonInput) {
			in.depth, in.depthKnown, in.oldestAge, in.ageKnown, in.p.DepthRetention = 180000, true, 23*time.Hour+55*time.Minute, true, 24*time.Hour
		}), ReasonLimited, "limited by cpu: 72.4 % above its 70 % setpoint; backlog 180000 drains in 6 m at the allowed 500 msg/s; " +
			"the oldest message (age 23 h 55 m) expires in 5 m, before the backlog drains: raise max_rate or the retention"},
		{"oldest message expires at a standstill", with(func(in *reasonInput) {
			in.depth, in.depthKnown, in.oldestAge, in.ageKnown, in.p.DepthRetention, in.out.Rate, in.p.MinRate = 10, true, 25*time.Hour, true, 24*time.Hour, 0, 0
		}), ReasonMinRate, "min_rate: at 0 msg/s; cpu: 72.4 % above its 70 % setpoint; backlog 10 does not drain at the allowed 0 msg/s; " +
			"the oldest message (age 25 h) expires now, before the backlog drains: raise max_rate or the retention"},
		{"oldest message drains first", with(func(in *reasonInput) {
			in.depth, in.depthKnown, in.oldestAge, in.ageKnown, in.p.DepthRetention = 3000, true, 23*time.Hour, true, 24*time.Hour
		}), ReasonLimited, "limited by cpu: 72.4 % above its 70 % setpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := explain(tt.in)
			if got.Code != tt.code || got.Text != tt.text {
				t.Errorf("explain = {%s %q}; want {%s %q}", got.Code, got.Text, tt.code, tt.text)
			}
		})
	}
}

func TestFmtNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 4.2: "4.2", 0.123456: "0.123", 72.44: "72.4", 310.4: "310", 1234567: "1.23e+06"} {
		if got := fmtNum(v); got != want {
			t.Errorf("fmtNum(%v) = %q; want %q", v, got, want)
		}
	}
	if !strings.Contains(fmtRate(2.5), "msg/s") {
		t.Errorf("fmtRate(2.5) = %q; want a unit", fmtRate(2.5))
	}
}

// TestParamsEditorReported: the tick that checks an edit reports who made
// it and what changed, as the editor recorded them in PARAMS.
func TestParamsEditorReported(t *testing.T) {
	attrs := map[string]any{"updated_by": "arn:aws:sts::000000000000:user/moto", "updated_changes": "setpoint: 70 -> 50"}
	var r Report
	_, _, status := paramsInForce(Snapshot{Loop: "l", Params: attrs}, nil, time.Time{}, &r, nil)
	if status == nil || r.ParamsUpdatedBy != attrs["updated_by"] || r.ParamsChanges != attrs["updated_changes"] {
		t.Errorf("report by %q, changes %q (status %v); want the PARAMS item's", r.ParamsUpdatedBy, r.ParamsChanges, status)
	}
}
