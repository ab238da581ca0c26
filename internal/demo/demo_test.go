package demo

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// shortScenario is the reference world compressed: start, a disturbance and
// a setpoint change in 60 minutes.
func shortScenario() sim.Scenario {
	s := sim.Reference()
	s.Duration = 60 * time.Minute
	s.Disturbances = []sim.Disturbance{{At: 20 * time.Minute, Duration: 15 * time.Minute, Size: 20}}
	s.SetpointChanges = []sim.SetpointChange{{At: 45 * time.Minute, Value: 50}}
	s.Backlog = 200_000
	return s
}

func run(t *testing.T, s sim.Scenario, poisonEvery int64) Result {
	t.Helper()
	c, _, err := Tune(s)
	if err != nil {
		t.Fatalf("Tune: %v", err)
	}
	res, err := Run(context.Background(), Config{Scenario: s, Params: DefaultParams(s, c), PoisonEvery: poisonEvery})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// The tests that run the demo for minutes of virtual time each keep one
// core busy: they call t.Parallel, so that go test runs them side by side.
func TestRunHoldsSetpointAndLosesNothing(t *testing.T) {
	t.Parallel()
	s := shortScenario()
	res := run(t, s, 1000)
	if lost := res.Counts.Lost(); lost != 0 {
		t.Errorf("lost = %d; want 0 (counts %+v)", lost, res.Counts)
	}
	if res.Counts.DeadLettered == 0 {
		t.Errorf("dead-lettered = 0; want the malformed messages in the dead-letter queue")
	}
	if ratio := res.Metrics.IAE / s.IAEBound(); ratio > 1.5 {
		t.Errorf("IAE ratio = %.2f; want <= 1.5 (the production tick and consumer must match the lab)", ratio)
	}
	if res.Metrics.StartOvershoot > 1 {
		t.Errorf("start overshoot = %.2f points; want <= 1", res.Metrics.StartOvershoot)
	}
	if res.Ticks != int(s.Duration/s.Tick) {
		t.Errorf("ticks = %d; want %d", res.Ticks, int(s.Duration/s.Tick))
	}
	// The consumers read RATE about once per second, never per message.
	if max := int64(s.Duration/time.Second) + 100; res.RateReads > max {
		t.Errorf("RATE reads = %d; want at most %d (one per cache period)", res.RateReads, max)
	}
	// After the setpoint edit, the allowed rate follows the new setpoint.
	n := len(res.Series.CPU)
	var mean float64
	for _, y := range res.Series.CPU[n-300:] {
		mean += y / 300
	}
	if mean < 48 || mean > 52 {
		t.Errorf("mean CPU over the last 5 minutes = %.1f; want 50 +- 2 after the setpoint edit", mean)
	}
}

func TestRunDeterministic(t *testing.T) {
	t.Parallel()
	s := shortScenario()
	s.Duration = 20 * time.Minute
	s.Noise = 1
	a, b := run(t, s, 0), run(t, s, 0)
	if a.Metrics.IAE != b.Metrics.IAE || a.Counts != b.Counts {
		t.Errorf("two runs with seed %d differ: IAE %v vs %v, counts %+v vs %+v", s.Seed, a.Metrics.IAE, b.Metrics.IAE, a.Counts, b.Counts)
	}
}

// A destination that drops what it acknowledges shows up as lost messages:
// the counters are independent.
func TestLossIsDetected(t *testing.T) {
	s := shortScenario()
	s.Duration = 5 * time.Minute
	c, _, err := Tune(s)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWorld(Config{Scenario: s, Params: DefaultParams(s, c)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msgs, err := w.Receive(ctx, 10)
	if err != nil || len(msgs) != 10 {
		t.Fatalf("Receive = %d, %v", len(msgs), err)
	}
	// Acknowledge without storing: a consumer bug.
	if err := w.Ack(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	got := Counts{Counts: sim.Counts{Produced: w.produced, Processed: w.processed, InFlight: int64(len(w.inflight)), Queued: w.queued()}}
	if got.Lost() != 10 {
		t.Errorf("Lost() = %d; want 10", got.Lost())
	}
}

// In stepping mode virtual time moves only by Advance: one tick per tick
// period, and the world stands still in between.
func TestStepping(t *testing.T) {
	s := shortScenario()
	c, _, err := Tune(s)
	if err != nil {
		t.Fatal(err)
	}
	var ticks []Tick
	sm, err := Start(Config{Scenario: s, Params: DefaultParams(s, c), OnTick: func(tk Tick) { ticks = append(ticks, tk) }, NoSeries: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	ctx := context.Background()
	for i := range 5 {
		if err := sm.Advance(ctx, s.Tick); err != nil {
			t.Fatalf("Advance %d: %v", i, err)
		}
	}
	if got, want := sm.Now(), epoch.Add(5*s.Tick); !got.Equal(want) {
		t.Errorf("Now() = %v; want %v", got, want)
	}
	if len(ticks) != 5 {
		t.Fatalf("%d ticks after 5 tick periods; want 5", len(ticks))
	}
	last := ticks[len(ticks)-1]
	if r, err := sm.Store().ReadRate(ctx, LoopID); err != nil || r.PerSecond <= 0 {
		t.Errorf("RATE after 5 ticks = %+v, %v; want a positive rate", r, err)
	}
	if last.Consumed <= 0 || last.Depth <= 0 {
		t.Errorf("last tick consumed %v, depth %d; want both positive", last.Consumed, last.Depth)
	}
	if err := sm.Err(); err != nil {
		t.Errorf("Err() = %v while running", err)
	}
}
