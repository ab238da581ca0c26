package loop_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/metric"
)

const lagQuery = "max(mysql_slave_status_seconds_behind_master)"

// replicaRig is the production tick (Ticker, memstore, fake clock, fake
// metrics) on a destination with two outputs: a CPU that follows the rate
// (10 % + 0.05 points per message/s) and the lag of a replica that applies
// capacity messages/s (an integrating process, never below 0). Loop "db"
// regulates both: CPU from CloudWatch, lag from Prometheus.
type replicaRig struct {
	*rig
	rate, cpuNow, lag float64
	capacity          func(i int) float64
	lagBlind          bool
}

func newReplicaRig(t *testing.T, edit func(a map[string]any)) *replicaRig {
	r := &replicaRig{rig: newRig(t), rate: 10}
	r.ticker.Metrics[prommetric.Name] = r.metrics
	r.params("db", func(a map[string]any) {
		a["kp"], a["ki"], a["slew_limit"], a["max_rate"] = 2.0, 0.02, 100.0, 3000.0
		a["signals"] = map[string]any{"lag": map[string]any{
			"setpoint": 10.0, "unit": "s", "kp": 10.0, "ki": 0.03,
			"metric_source": "prometheus", "metric_promql": lagQuery, "stale_after": "3m",
		}}
		if edit != nil {
			edit(a)
		}
	})
	return r
}

// step runs the plant one minute at the rate in force, publishes both
// metrics, and ticks.
func (r *replicaRig) step(i int) loop.Report {
	r.t.Helper()
	c := r.capacity(i)
	r.cpuNow = 10 + 0.05*r.rate
	r.lag = math.Max(0, r.lag+(r.rate-c)/c*60)
	r.cpu("db", r.cpuNow, 30*time.Second)
	if r.lagBlind {
		r.metrics.set(lagQuery, metric.Sample{})
	} else {
		r.metrics.setLive(lagQuery, liveMetric{value: r.lag, age: 10 * time.Second})
	}
	rep := r.tick("db")
	if rep.Outcome != loop.OutcomeApplied {
		r.t.Fatalf("tick %d: %+v", i, rep)
	}
	rt, err := r.store.ReadRate(context.Background(), "db")
	if err != nil || rt.PerSecond != rep.Rate {
		r.t.Fatalf("tick %d: RATE %+v (%v); report says %v", i, rt, err, rep.Rate)
	}
	r.rate = rep.Rate
	return rep
}

// replicaSlows: the replica takes 2,000 messages/s (the CPU limits, at
// 1,200), slows to 800 between minutes 60 and 120 (the lag takes over),
// and recovers between minutes 200 and 260 (the CPU takes over again):
// straight lines between the breakpoints (minute, capacity).
func replicaSlows(i int) float64 {
	bp := [][2]float64{{0, 2000}, {60, 2000}, {120, 800}, {200, 800}, {260, 2000}}
	m := float64(i)
	for k := 1; k < len(bp); k++ {
		if a, b := bp[k-1], bp[k]; m < b[0] {
			return a[1] + (b[1]-a[1])*(m-a[0])/(b[0]-a[0])
		}
	}
	return bp[len(bp)-1][1]
}

func signal(rep loop.Report, name string) loop.SignalReport {
	for _, s := range rep.Signals {
		if s.Name == name {
			return s
		}
	}
	return loop.SignalReport{}
}

// Bumpless hand-over on the production tick: at every switch of the
// limiting signal the rate moves by no more than one tick's slew limit; the
// lag is held at its setpoint while it limits, the CPU at its own after.
func TestTickOverrideBumplessHandOver(t *testing.T) {
	r := newReplicaRig(t, nil)
	r.capacity = replicaSlows
	var prev loop.Report
	switches := 0
	for i := range 300 {
		before := r.rate
		rep := r.step(i)
		st, err := r.store.ReadState(context.Background(), "db")
		if err != nil {
			t.Fatal(err)
		}
		if st.Limiting != rep.Limiting || len(st.Signals) != 2 || st.Signals[1].Name != "lag" {
			t.Fatalf("tick %d: STATE limiting %q signals %+v; report %q", i, st.Limiting, st.Signals, rep.Limiting)
		}
		if i > 0 && rep.Limiting != prev.Limiting {
			switches++
			t.Logf("minute %d: %s -> %s, rate %.1f -> %.1f (cpu %.1f %%, lag %.2f s)", i, prev.Limiting, rep.Limiting, before, rep.Rate, r.cpuNow, r.lag)
			if d := math.Abs(rep.Rate - before); d > 100+1e-9 {
				t.Errorf("minute %d: switch %s -> %s moved the rate by %.1f, more than the slew limit 100", i, prev.Limiting, rep.Limiting, d)
			}
		}
		switch i {
		case 190:
			if rep.Limiting != "lag" || math.Abs(r.lag-10) > 1 || r.cpuNow > 70 {
				t.Errorf("minute 190: limiting %s, lag %.2f s (setpoint 10), cpu %.1f %%", rep.Limiting, r.lag, r.cpuNow)
			}
		case 299:
			if rep.Limiting != "cpu" || math.Abs(r.cpuNow-70) > 1 {
				t.Errorf("minute 299: limiting %s, cpu %.2f %% (setpoint 70)", rep.Limiting, r.cpuNow)
			}
		}
		prev = rep
	}
	if switches < 2 {
		t.Fatalf("%d switches of the limiting signal; want cpu -> lag and lag -> cpu", switches)
	}
}

// While the lag limits, the CPU's controller asks for the applied rate plus
// its proportional action and no more: its integrator does not wind up,
// however long it is not in charge. Both signals are read in the batch of
// their source: one CloudWatch and one Prometheus call per tick.
func TestTickOverrideNonSelectedDoesNotWindUp(t *testing.T) {
	r := newReplicaRig(t, nil)
	r.capacity = func(int) float64 { return 800 }
	lagTicks := 0
	for i := range 150 {
		before := r.rate
		calls := len(r.metrics.calls)
		rep := r.step(i)
		if n := len(r.metrics.calls) - calls; n != 2 {
			t.Fatalf("tick %d: %d metric reads; want one per source (2)", i, n)
		}
		cpu := signal(rep, "cpu")
		if rep.Limiting != "lag" {
			continue
		}
		lagTicks++
		if !cpu.Tracking {
			t.Errorf("tick %d: cpu not tracking while the lag limits", i)
		}
		e := 70 - cpu.Measured
		if over := cpu.Rate - before; over > 2*e+0.02*e*60+1e-6 {
			t.Fatalf("tick %d: the cpu controller asks %.1f above the applied rate, more than Kp e + Ki e dt = %.1f: it winds up", i, over, 2*e+0.02*e*60)
		}
	}
	if lagTicks < 100 {
		t.Fatalf("the lag limited %d of 150 ticks; the scenario wants it in charge", lagTicks)
	}
}

// The limiting signal going stale fails the loop closed to min_rate after
// its grace; a stale signal that did not limit follows its own policy
// (hold: it keeps asking what it asked) and does not take over.
func TestTickOverrideStaleSignals(t *testing.T) {
	r := newReplicaRig(t, nil)
	r.capacity = func(int) float64 { return 800 }
	for i := range 100 {
		r.step(i)
	}
	if rep := r.step(100); rep.Limiting != "lag" || rep.Rate < 500 {
		t.Fatalf("before the outage: limiting %s at %.0f; want the lag near 800", rep.Limiting, rep.Rate)
	}
	r.lagBlind = true
	rep := r.step(101)
	if !rep.Stale || rep.Limiting != "lag" || rep.Rate != 10 || !signal(rep, "lag").Stale {
		t.Fatalf("the limiting lag went blind: stale %v limiting %s rate %v; want the loop failed closed to min_rate 10", rep.Stale, rep.Limiting, rep.Rate)
	}

	// The CPU limits (the replica is fast) and the lag goes blind: it
	// holds what it asked, the CPU keeps the rate.
	r = newReplicaRig(t, nil)
	r.capacity = func(int) float64 { return 5000 }
	for i := range 60 {
		r.step(i)
	}
	before := r.step(60)
	if before.Limiting != "cpu" {
		t.Fatalf("fast replica: limiting %s; want cpu", before.Limiting)
	}
	r.lagBlind = true
	for i := 61; i < 70; i++ {
		rep := r.step(i)
		if rep.Limiting != "cpu" || rep.Stale || !signal(rep, "lag").Stale || signal(rep, "lag").Rate != signal(before, "lag").Rate {
			t.Fatalf("minute %d, lag blind with hold: limiting %s stale %v, lag asks %v (asked %v)", i, rep.Limiting, rep.Stale, signal(rep, "lag").Rate, signal(before, "lag").Rate)
		}
	}
}

// drain_feedforward on the production tick: once the lag limits at a
// steady capacity, the lag's controller runs on the replica's pace
// measured from the lag and the rates applied (STATE's drain), within 10 %
// of the capacity, and holds the lag near its setpoint.
func TestTickOverrideDrainFeedforward(t *testing.T) {
	r := newReplicaRig(t, func(a map[string]any) {
		sig := a["signals"].(map[string]any)["lag"].(map[string]any)
		sig["drain_feedforward"], sig["kp"], sig["ki"] = true, 5.0, 0.005
	})
	r.capacity = func(int) float64 { return 800 }
	var lagSum float64
	limited := 0
	for i := range 240 {
		rep := r.step(i)
		if i >= 180 {
			lagSum += r.lag
			if rep.Limiting == "lag" {
				limited++
			}
		}
	}
	st, err := r.store.ReadState(context.Background(), "db")
	if err != nil {
		t.Fatal(err)
	}
	lag := st.Signals[1]
	if limited < 50 || lag.Drain == nil {
		t.Fatalf("lag limited %d of the last 60 ticks, drain %+v; want the lag limiting on its measured pace", limited, lag.Drain)
	}
	if math.Abs(lag.Drain.Pace-800)/800 > 0.1 || (lag.Terms.FF != lag.Drain.Pace && !lag.Tracking) {
		t.Fatalf("measured pace %.1f (FF %.1f); want within 10 %% of the replica's 800 msg/s, as the FF", lag.Drain.Pace, lag.Terms.FF)
	}
	if mean := lagSum / 60; math.Abs(mean-10) > 2 {
		t.Fatalf("mean lag %.1f s over the last hour, want its setpoint 10 s within 2", mean)
	}
}
