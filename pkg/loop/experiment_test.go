package loop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

func TestDecodeParamsExperiment(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a[loop.AttrExperiment] = "id=e1,step=5,abort_above=85,max_duration=20m,max_rate_step=300"
	}), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	want := loop.Experiment{ID: "e1", Step: 5, AbortAbove: 85, MaxDuration: 20 * time.Minute, MaxRateStep: 300}
	if p.Experiment == nil || *p.Experiment != want {
		t.Fatalf("experiment = %+v; want %+v", p.Experiment, want)
	}
	back, err := loop.DecodeParams("orders", p.Attrs(looptest.Sources()), looptest.Sources())
	if err != nil || *back.Experiment != want {
		t.Fatalf("round trip: %+v, %v; want %+v", back.Experiment, err, want)
	}
}

func TestDecodeParamsExperimentRefusals(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"step=5,abort_above=85,max_duration=20m", "id is required"},
		{"id=e,step=25,abort_above=85,max_duration=20m", "at most 20"},
		{"id=e,step=5,abort_above=60,max_duration=20m", "must lie above"},
		{"id=e,step=5,abort_above=85,max_duration=0s", "max_duration"},
		{"id=e,kind=relay,step=5,abort_above=85,max_duration=20m", "an experiment is a setpoint step"},
		{"id=e,step=5,abort_above=85,max_duration=20m,size=3", "unknown field"},
		{"id=e,step=5,abort_above=85,max_duration=20m", "not manual"},
	} {
		_, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
			a[loop.AttrExperiment] = tc.text
			if tc.want == "not manual" {
				a["mode"], a["manual_rate"] = "manual", 100.0
			}
		}), looptest.Sources())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("experiment %q: error %v; want one saying %q", tc.text, err, tc.want)
		}
	}
}

// A stale metric ends a running experiment and the stale policy acts; an
// experiment runs once per id.
func TestExperimentStaleEndsItOnce(t *testing.T) {
	m := control.FOPDT{Gain: 0.05, Tau: 15 * time.Second, DeadTime: 5 * time.Second, Base: 10}
	pl := newPlantLoop(t, m, m.Input(50), time.Minute, 90*time.Second)
	edit := func(a map[string]any) { a["setpoint"], a["kp"], a["ki"] = 50.0, 1.0, 0.2 }
	pl.params(edit)
	for range 5 {
		pl.step()
	}
	pl.params(func(a map[string]any) {
		edit(a)
		a[loop.AttrExperiment] = "id=x1,step=5,abort_above=80,max_duration=30m"
	})
	rep, _ := pl.step()
	if x := pl.experiment(); x == nil || x.Status != loop.ExperimentRunning || rep.Setpoint != 55 {
		t.Fatalf("after the edit: experiment %+v, recorded setpoint %v; want running at 55", x, rep.Setpoint)
	}
	pl.outage = true
	for range 10 {
		if rep, _ = pl.step(); rep.Stale {
			break
		}
	}
	x := pl.experiment()
	if !rep.Stale || x.Status != loop.ExperimentAborted || !strings.Contains(x.Reason, "stale") || rep.Setpoint != 50 {
		t.Fatalf("metric stale: report stale %v, setpoint %v, experiment %+v; want aborted by the stale metric, setpoint 50", rep.Stale, rep.Setpoint, x)
	}
	pl.outage = false
	for range 5 {
		pl.step()
	}
	if again := pl.experiment(); again.Status != loop.ExperimentAborted || !again.EndedAt.Equal(x.EndedAt) {
		t.Fatalf("after the metric returned: experiment %+v; want it left as it ended (once per id)", again)
	}
}

func (pl *plantLoop) experiment() *loop.ExperimentState {
	pl.t.Helper()
	st, err := pl.store.ReadState(context.Background(), pl.id)
	if err != nil {
		pl.t.Fatal(err)
	}
	return st.Experiment
}
