package sim

import (
	"math"
	"testing"
	"time"
)

// The floor of the reference scenario is the arithmetic: 60 x 20 +
// 20 x 20 + 2 x 20 x 170 point-s.
func TestIAEFloorReference(t *testing.T) {
	s := Reference()
	if got, want := s.IAEFloor(), 60.0*20+20*20+2*20*170; got != want {
		t.Fatalf("IAEFloor() = %v; want %v", got, want)
	}
	s.PlantChanges = []PlantChange{{At: 30 * time.Minute, Gain: 0.1}}
	if got := s.IAEFloor(); got != 8400 {
		t.Fatalf("IAEFloor() with a plant change = %v; want 8400 (a plant change is not charged)", got)
	}
}

func TestIAEByEventSumsToIAE(t *testing.T) {
	s := Reference()
	r, err := Run(s, PolicyFunc(func(Observation) float64 { return 1000 }))
	if err != nil {
		t.Fatal(err)
	}
	ev := IAEByEvent(s, r.Series)
	if len(ev) != 4 || ev[0].Kind != "start" || ev[0].Floor != 1200 || ev[1].Floor != 3400 {
		t.Fatalf("IAEByEvent = %+v; want start (floor 1200), disturbance (3400), ...", ev)
	}
	sum := 0.0
	for _, e := range ev {
		sum += e.IAE
	}
	if math.Abs(sum-r.Metrics.IAE) > 1e-6*r.Metrics.IAE {
		t.Fatalf("sum of IAEByEvent = %v; want the run's IAE %v", sum, r.Metrics.IAE)
	}
}

func TestPlantChangeResponses(t *testing.T) {
	s := Reference()
	s.Duration, s.Disturbances, s.SetpointChanges = 30*time.Minute, nil, nil
	s.PlantChanges = []PlantChange{{At: 5 * time.Minute, Gain: 0.1}}
	ser := Series{}
	for k := 1; k <= 1800; k++ {
		t := float64(k)
		cpu := 70.0
		switch {
		case t > 300 && t <= 600: // the jump
			cpu = 100
		case t > 600 && t <= 700: // below, then back over
			cpu = 60
		case t > 700 && t <= 800:
			cpu = 74
		}
		ser.T = append(ser.T, t)
		ser.CPU = append(ser.CPU, cpu)
		ser.Setpoint = append(ser.Setpoint, 70)
	}
	r := PlantChangeResponses(s, ser)
	if len(r) != 1 {
		t.Fatalf("%d responses; want 1", len(r))
	}
	got := r[0]
	if got.PeakPP != 30 || got.OvershootPP != 4 || got.SettleS == nil || *got.SettleS != 500 || !got.Stable {
		t.Fatalf("response %+v (settle %v); want peak 30, overshoot 4, settle 500, stable", got, got.SettleS)
	}
}
