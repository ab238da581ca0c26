package lab

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// Robustness: on the reference scenario pi-aw-spf-ff is within 1.25 of the
// tight floor with a start overshoot of at most 1 point.
func TestFloorRatioReference(t *testing.T) {
	rep, err := Compare(sim.Reference(), Options{Controllers: []string{PIAWSPFF}})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.IAEFloorRatio > 1.25 || r.StartOvershootPP > 1 {
		t.Fatalf("iae_floor_ratio %.3f, start overshoot %.2f; want <= 1.25, <= 1", r.IAEFloorRatio, r.StartOvershootPP)
	}
}

// Robustness: the true plant's gain doubles, halves, or its dead time goes
// from 5 s to 20 s at 30 min, the controller is not told: pi-aw-spf-ff is
// back within ±2 points of the setpoint for good within 15 minutes (no
// sustained oscillation) and overshoots by at most 5 points.
func TestRobustToPlantChanges(t *testing.T) {
	dead := 20 * time.Second
	for _, c := range []sim.PlantChange{
		{At: 30 * time.Minute, Gain: 0.1},
		{At: 30 * time.Minute, Gain: 0.025},
		{At: 30 * time.Minute, DeadTime: &dead},
	} {
		s := sim.Reference()
		s.PlantChanges = []sim.PlantChange{c}
		rep, err := Compare(s, Options{Controllers: []string{PIAWSPFF}})
		if err != nil {
			t.Fatal(err)
		}
		r := rep.Results[0]
		if len(r.PlantChanges) != 1 {
			t.Fatalf("%s: %d plant change responses; want 1", c, len(r.PlantChanges))
		}
		pc := r.PlantChanges[0]
		if !pc.Stable || pc.OvershootPP > 5 || r.StartOvershootPP > 5 || r.Lost != 0 {
			t.Errorf("%s: %+v, start overshoot %.2f, lost %d; want stable, overshoot <= 5, nothing lost", c, pc, r.StartOvershootPP, r.Lost)
		}
	}
}
