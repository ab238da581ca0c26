package sim

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

func dur(d time.Duration) *time.Duration { return &d }

func TestPlantAtAppliesChangesInTimeOrder(t *testing.T) {
	s := Reference()
	s.PlantChanges = []PlantChange{
		{At: 90 * time.Minute, DeadTime: dur(20 * time.Second)},
		{At: 30 * time.Minute, Gain: 0.1},
		{At: 60 * time.Minute, Gain: 0.025, Tau: dur(30 * time.Second)},
	}
	for _, c := range []struct {
		at   time.Duration
		want control.FOPDT
	}{
		{0, s.Plant},
		{30*time.Minute - 1, s.Plant},
		{30 * time.Minute, control.FOPDT{Gain: 0.1, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}},
		{75 * time.Minute, control.FOPDT{Gain: 0.025, Base: 10, Tau: 30 * time.Second, DeadTime: 5 * time.Second}},
		{2 * time.Hour, control.FOPDT{Gain: 0.025, Base: 10, Tau: 30 * time.Second, DeadTime: 20 * time.Second}},
	} {
		if got := s.PlantAt(c.at); got != c.want {
			t.Errorf("PlantAt(%v) = %+v; want %+v", c.at, got, c.want)
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestValidateRefusesBadPlantChanges(t *testing.T) {
	for name, c := range map[string]PlantChange{
		"nothing":       {At: time.Minute},
		"negative time": {At: -time.Second, Gain: 0.1},
		"negative gain": {At: time.Minute, Gain: -1},
		"NaN gain":      {At: time.Minute, Gain: math.NaN()},
		"negative tau":  {At: time.Minute, Tau: dur(-time.Second)},
		"dead time 2h":  {At: time.Minute, DeadTime: dur(2 * time.Hour)},
	} {
		s := Reference()
		s.PlantChanges = []PlantChange{c}
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate(%+v) = nil; want an error", name, c)
		}
	}
}

// A gain change moves the steady state by the new gain without a jump of
// the lag state; a longer dead time delays a step by the new dead time.
func TestPlantSetModel(t *testing.T) {
	m := control.FOPDT{Gain: 0.05, Base: 10, Tau: 0, DeadTime: 5 * time.Second}
	p := NewPlant(m, time.Second, 1000)
	if y := p.Step(1000, 0); y != 60 {
		t.Fatalf("steady state %v; want 60", y)
	}
	m.Gain = 0.1
	p.SetModel(m)
	if y := p.Step(1000, 0); y != 100 {
		t.Fatalf("after the gain doubles: %v; want 100 (saturated)", y)
	}
	m.Gain, m.DeadTime = 0.05, 20*time.Second
	p.SetModel(m)
	var first int
	for k := 1; k <= 40; k++ {
		if y := p.Step(0, 0); y < 60 && first == 0 {
			first = k
		}
	}
	// The buffer held 5 s of 1000 msg/s, padded to 20 s: the step to 0
	// shows after 20 steps.
	if first != 21 {
		t.Fatalf("a step to 0 shows at step %d after the dead time grew to 20s; want 21", first)
	}
}

func TestRunFollowsPlantChange(t *testing.T) {
	s := Reference()
	s.Duration, s.Disturbances, s.SetpointChanges = 40*time.Minute, nil, nil
	s.PlantChanges = []PlantChange{{At: 20 * time.Minute, Gain: 0.1}}
	r, err := Run(s, PolicyFunc(func(Observation) float64 { return 600 }))
	if err != nil {
		t.Fatal(err)
	}
	before, after := r.Series.CPU[19*60], r.Series.CPU[39*60]
	if math.Abs(before-40) > 0.01 || math.Abs(after-70) > 0.01 {
		t.Fatalf("CPU at 600 msg/s: %.2f before, %.2f after the gain doubles; want 40 and 70", before, after)
	}
}
