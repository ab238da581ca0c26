package stepdemo_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/dashboard/stepdemo"
	"github.com/sluice-dev/sluice/internal/sim"
)

func TestIdleBurstTrafficMarksDemandLimitedTicks(t *testing.T) {
	d, err := stepdemo.NewWithTraffic(t0, 1, stepdemo.Traffic{Scenario: sim.PresetIdleBurst})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ps := steps(t, d, 75)
	limited := 0
	for _, p := range ps[10:58] {
		if p.Limited {
			limited++
		}
	}
	if limited < 40 {
		t.Errorf("%d of 48 idle ticks marked demand-limited; want nearly all", limited)
	}
	var peak float64
	for _, p := range ps[61:] {
		peak = max(peak, p.Consumed)
	}
	if peak < 100 {
		t.Errorf("consumed after the burst at most %v msg/s; want the burst drained near the 120 msg/s capacity", peak)
	}
	for _, p := range ps[61:] {
		if p.Measured > 75+1 {
			t.Errorf("measured CPU %v after the burst; want at most the setpoint + 5 (and the datapoint's noise)", p.Measured)
			break
		}
	}
	if _, err := stepdemo.NewWithTraffic(t0, 1, stepdemo.Traffic{Scenario: "nope"}); err == nil {
		t.Error("unknown scenario: no error")
	}
}
