package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// rampLoop is plantLoop with consumers that take every message they are
// allowed (a backlog) and report their running count in a lease every 2 s,
// ticked every 5 s as the e2e runs the loop.
type rampLoop struct {
	*plantLoop
	stored float64
	start  time.Time
}

// runReporting advances the plant by d at the consumers' rate, counting
// what they store and refreshing their lease every 2 s.
func (rl *rampLoop) runReporting(d time.Duration) {
	for range int(d / time.Second) {
		rl.run(time.Second)
		rl.stored += rl.rate
		if rl.now%(2*time.Second) == 0 {
			now := rl.epoch.Add(rl.now)
			p := protocol.Peer{Loop: rl.id, Instance: "i-1", Stored: int64(rl.stored), StartedAt: rl.start,
				ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)}
			if err := rl.store.ReportPeer(context.Background(), p); err != nil {
				rl.t.Fatal(err)
			}
		}
	}
}

// A rate that climbs is not a plant that takes less: the consumers' processed
// rate, averaged over loop.ProcessedSmoothing, lags what they were allowed
// while the rate rises, and must not be read as the queue running dry (the
// demand hold would then keep the rate near the lagging average and the loop
// would creep up to its setpoint instead of rising as tuned).
func TestRampIsNotDemandLimited(t *testing.T) {
	m := control.FOPDT{Gain: 1.38, Tau: 32 * time.Millisecond, DeadTime: 865 * time.Millisecond, Base: 1.6}
	const tick = 5 * time.Second
	pl := newPlantLoop(t, m, 3, tick, tick)
	rl := &rampLoop{plantLoop: pl, start: pl.epoch}
	pl.params(func(a map[string]any) {
		a["setpoint"], a["kp"], a["ki"], a["min_rate"], a["max_rate"] = 20.0, 0.2, 0.03, 3.0, 60.0
		a["ff_gain"], a["ff_base"], a["ff_dead_time"] = m.Gain, m.Base, "1s"
		a["delay_aware"], a["anti_windup"], a["setpoint_filter"] = true, "conditional", "10s"
		a["tick_period"], a["metric_period"], a["slew_limit"] = "5s", "5s", 0.0
	})
	var limited int
	var cpu float64     // summed over the second minute
	for i := range 24 { // two minutes
		rep := pl.tick()
		t.Logf("tick %d: rate %.2f, processed %.2f, cpu %.1f", i, rep.Rate, rep.Processed, pl.lastCPU)
		if rep.DemandLimited {
			limited++
		}
		rl.runReporting(tick)
		if i >= 12 {
			cpu += pl.lastCPU
		}
	}
	if limited > 0 {
		t.Errorf("%d of 24 ticks held as demand-limited while the consumers took all they were allowed", limited)
	}
	// The loop's own settling on this plant takes well under a minute; a
	// loop that reads the lag as a plant taking less stops integrating
	// and stays below the setpoint.
	if mean := cpu / 12; mean < 19 || mean > 21 {
		t.Errorf("mean CPU over the second minute %.1f %%; want within 1 point of the setpoint 20", mean)
	}
}
