package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

func TestInnerParams(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(nil), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if _, on := p.InnerConfig(); on {
		t.Errorf("InnerConfig of a loop without inner_loop: on; want off")
	}
	p, err = loop.DecodeParams("orders", valid(func(a map[string]any) { a["inner_loop"] = true }), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	c, on := p.InnerConfig()
	if !on || c.Tolerance != loop.DefaultInnerTolerance || c.ReactionTime != loop.DefaultInnerReactionTime {
		t.Errorf("InnerConfig = %+v, %v; want the defaults, on", c, on)
	}
	wantRoundTrip(t, "inner loop with defaults", p)
	p, err = loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["inner_loop"], a["inner_tolerance"], a["inner_reaction_time"] = true, 0.3, "1m"
	}), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := p.InnerConfig(); c.Tolerance != 0.3 || c.ReactionTime != time.Minute || c.Trip != 0 {
		t.Errorf("InnerConfig = %+v; want tolerance 0.3, reaction time 1m, no trip of its own", c)
	}
	wantRoundTrip(t, "inner loop", p)
	p, err = loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["inner_loop"], a["inner_trip"] = true, 0.08
	}), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := p.InnerConfig(); c.Tolerance != loop.DefaultInnerTolerance || c.Trip != 0.08 {
		t.Errorf("InnerConfig = %+v; want the default tolerance, trip 0.08", c)
	}
	wantRoundTrip(t, "inner loop with a trip", p)
}

func TestInnerParamsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, field, says string
		edit              func(a map[string]any)
	}{
		{"tolerance without the loop", "inner_tolerance", "inner_loop", func(a map[string]any) { a["inner_tolerance"] = 0.3 }},
		{"tolerance out of range", "inner_tolerance", "", func(a map[string]any) { a["inner_loop"], a["inner_tolerance"] = true, -1.0 }},
		{"trip without the loop", "inner_trip", "inner_loop", func(a map[string]any) { a["inner_trip"] = 0.08 }},
		{"trip out of range", "inner_trip", "", func(a map[string]any) { a["inner_loop"], a["inner_trip"] = true, 11.0 }},
		{"reaction time too short", "inner_reaction_time", "", func(a map[string]any) { a["inner_loop"], a["inner_reaction_time"] = true, "10ms" }},
		{"not a boolean", "inner_loop", "BOOL", func(a map[string]any) { a["inner_loop"] = "yes" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loop.DecodeParams("orders", valid(tc.edit), looptest.Sources())
			wantRefused(t, err, tc.field, tc.says)
		})
	}
}

// RATE carries the inner loop's settings at every tick while inner_loop is
// true (the consumers read them there), and not while it is off or unset.
func TestTickRateCarriesTheInnerSettings(t *testing.T) {
	r := newRig(t)
	r.cpu("orders", 40, 30*time.Second)
	readInner := func() *protocol.InnerSettings {
		t.Helper()
		r.tick("orders")
		rate, err := r.store.ReadRate(context.Background(), "orders")
		if err != nil {
			t.Fatal(err)
		}
		return rate.Inner
	}
	r.params("orders", nil)
	if got := readInner(); got != nil {
		t.Errorf("RATE.Inner without inner_loop = %+v; want none", got)
	}
	r.params("orders", func(a map[string]any) {
		a["inner_loop"], a["inner_tolerance"], a["inner_reaction_time"], a["inner_trip"] = true, 0.3, "40s", 0.1
		a["tick_period"] = "20s"
	})
	// Settle: the consumers wait three ticks of a settled share before they
	// learn the latency at the setpoint. At 40 % against a setpoint of 70
	// the loop is not settled: they learn nothing.
	want := protocol.InnerSettings{Tolerance: 0.3, Trip: 0.1, ReactionTime: 40 * time.Second, Settle: time.Minute, Unsettled: true}
	if got := readInner(); got == nil || *got != want {
		t.Errorf("RATE.Inner with inner_loop, CPU 40 %% at setpoint 70 = %+v; want %+v", got, want)
	}
	r.cpu("orders", 73, 30*time.Second) // within 5 points
	want.Unsettled = false
	if got := readInner(); got == nil || *got != want {
		t.Errorf("RATE.Inner with inner_loop, CPU 73 %% at setpoint 70 = %+v; want %+v", got, want)
	}
	r.cpu("orders", 70, time.Hour) // at the setpoint, but stale
	want.Unsettled = true
	if got := readInner(); got == nil || *got != want {
		t.Errorf("RATE.Inner with inner_loop, a stale datapoint = %+v; want %+v", got, want)
	}
	r.params("orders", func(a map[string]any) { a["inner_loop"] = false })
	if got := readInner(); got != nil {
		t.Errorf("RATE.Inner after inner_loop false = %+v; want none", got)
	}
}

// Turning the inner loop off is an edit of inner_loop alone: the tuning
// attributes may stay in PARAMS, unused while it is off, so that turning
// it on again brings them back.
func TestInnerLoopOffKeepsItsTuning(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["inner_loop"], a["inner_tolerance"], a["inner_reaction_time"] = false, 0.3, "1m"
	}), looptest.Sources())
	if err != nil {
		t.Fatalf("inner_loop false with its tuning set: %v; want accepted", err)
	}
	if _, on := p.InnerConfig(); on {
		t.Errorf("InnerConfig with inner_loop false: on; want off")
	}
}
