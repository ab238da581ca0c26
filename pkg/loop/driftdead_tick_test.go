package loop_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
)

// deadTimeRun runs the production tick on the reference plant with noise 1
// point (the demo's gains and model): 20 ticks at the setpoint 70, then the
// plant's dead time becomes deadTime (unchanged when zero) and one tick
// later the setpoint is edited to 50. It returns the number of ticks from
// the change to the first report that says model_drift (-1: none within
// ticks), and the STATE's drift record at the end.
func deadTimeRun(t *testing.T, seed uint64, deadTime time.Duration, ticks int) (int, loopDrift) {
	t.Helper()
	m := control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	pl := newPlantLoop(t, m, m.Input(70), time.Minute, 90*time.Second)
	pl.pipe = sim.NewPipeline(time.Minute, 90*time.Second, 1, rand.New(rand.NewPCG(seed, 7)), pl.lastCPU)
	setpoint := 70.0
	edit := func(a map[string]any) {
		a["setpoint"], a["kp"], a["ki"], a["noise_band"] = setpoint, 0.945, 0.258, 2.79
		a["min_rate"], a["max_rate"], a["delay_aware"] = 0.0, 3000.0, true
		a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"] = 0.05, 10.0, "15s", "5s"
	}
	pl.params(edit)
	for range 20 {
		pl.step()
	}
	if deadTime > 0 {
		c := m
		c.DeadTime = deadTime
		pl.plant.SetModel(c)
	}
	first := -1
	for k := 1; k <= ticks; k++ {
		pl.run(time.Minute)
		if k == 2 {
			setpoint = 50
			pl.params(edit)
		}
		if rep := pl.tick(); rep.ModelDrift && first < 0 {
			first = k
		}
	}
	st, err := pl.store.ReadState(context.Background(), pl.id)
	if err != nil {
		t.Fatal(err)
	}
	return first, loopDrift{st.Drift.ModelDrift, st.Drift.Reason, st.Drift.DeadTime}
}

// loopDrift is what a test reads of STATE's drift record.
type loopDrift struct {
	set      bool
	reason   string
	deadTime time.Duration
}

// The plant's dead time grows from 5 s to 20 s at a steady rate, and a
// setpoint edit follows a minute later: the loop says model_drift within
// 10 ticks, for the dead time, estimated near 20 s. Without the change the
// same edit says nothing.
func TestTickSaysDeadTimeDrift(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		if first, d := deadTimeRun(t, seed, 0, 20); first >= 0 || d.set {
			t.Errorf("seed %d, no change: model_drift after %d ticks (%+v); want never", seed, first, d)
		}
		first, d := deadTimeRun(t, seed, 20*time.Second, 10)
		if first < 1 || d.reason != "dead_time" || d.deadTime < 15*time.Second || d.deadTime > 25*time.Second {
			t.Errorf("seed %d, dead time 5s to 20s: model_drift after %d ticks, %+v; want within 10 ticks, for the dead time, about 20s", seed, first, d)
		}
	}
}
