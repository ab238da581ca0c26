package loop_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

func TestDecodeParamsExperiment(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a[loop.AttrExperiment] = "id=e1,step=5,abort_above=85,max_duration=20m,max_rate_step=300"
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := loop.Experiment{ID: "e1", Kind: loop.ExperimentSetpointStep, Step: 5, AbortAbove: 85, MaxDuration: 20 * time.Minute, MaxRateStep: 300}
	if p.Experiment == nil || *p.Experiment != want {
		t.Fatalf("experiment = %+v; want %+v", p.Experiment, want)
	}
	back, err := loop.DecodeParams("orders", p.Attrs())
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
		{"id=e,kind=relay,step=5,abort_above=85,max_duration=20m", "only setpoint-step"},
		{"id=e,step=5,abort_above=85,max_duration=20m,size=3", "unknown field"},
	} {
		_, err := loop.DecodeParams("orders", valid(func(a map[string]any) { a[loop.AttrExperiment] = tc.text }))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("experiment %q: error %v; want one saying %q", tc.text, err, tc.want)
		}
	}
}
