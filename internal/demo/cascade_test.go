package demo

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestCascadeCutsTheDisturbance runs the production tick and consumer with
// and without the inner loop through a disturbance: with it, and the
// consumers' report of what it withheld, the CPU spends at least five
// times fewer seconds above setpoint + 5 after the onset, nothing is lost
// and as much is processed.
func TestCascadeCutsTheDisturbance(t *testing.T) {
	t.Parallel()
	s := sim.Reference()
	s.Duration = 30 * time.Minute
	s.Disturbances = []sim.Disturbance{{At: 15 * time.Minute, Duration: 10 * time.Minute, Size: 20}}
	s.SetpointChanges, s.Backlog = nil, 200_000
	c, _, err := Tune(s)
	if err != nil {
		t.Fatal(err)
	}
	above := map[bool]float64{}
	processed := map[bool]int64{}
	for _, inner := range []bool{false, true} {
		cfg := Config{Scenario: s, Params: DefaultParams(s, c)}
		if inner {
			cfg.Inner = &consume.InnerConfig{}
		}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if lost := res.Counts.Lost(); lost != 0 {
			t.Errorf("inner %v: lost %d", inner, lost)
		}
		for _, e := range sim.IAEByEvent(s, res.Series) {
			if e.Kind == "disturbance" {
				above[inner] = e.ViolationS
			}
		}
		processed[inner] = res.Metrics.Processed
		if inner && len(res.Series.Latency) != len(res.Series.T) {
			t.Errorf("latency series of %d points for %d steps", len(res.Series.Latency), len(res.Series.T))
		}
	}
	t.Logf("seconds above sp+5 after the onset: %v without the inner loop, %v with; processed %v", above[false], above[true], processed)
	if !(above[true]*5 <= above[false]) || above[false] == 0 {
		t.Errorf("seconds above sp+5 after the onset: %v with the inner loop, %v without; want at least 5 times fewer", above[true], above[false])
	}
	if float64(processed[true]) < 0.98*float64(processed[false]) {
		t.Errorf("processed %d with the inner loop, %d without; want >= 0.98 x", processed[true], processed[false])
	}
}
