package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// foreignRig is a rig whose loop "orders" owns the mapping of a consumer
// without Sluice code (esm_function, esm_queue): no lease reports, the
// function's and the queue's CloudWatch figures are all there is. Manual
// mode, so that the test scripts the allowed rate.
func foreignRig(t *testing.T) (*rig, *switchingMapping) {
	r := newRig(t)
	m := &switchingMapping{fakeMapping: &fakeMapping{value: 10, clock: r.clock}, enabled: true}
	r.ticker.Mappings = m
	r.cpu("orders", 50, 30*time.Second)
	r.allowForeign(0)
	return r, m
}

func (r *rig) allowForeign(rate float64) {
	r.params("orders", func(a map[string]any) {
		a["mode"], a["manual_rate"], a["min_rate"], a["max_rate"] = "manual", rate, 0.0, 100000.0
		a["esm_uuid"], a["esm_function"], a["esm_queue"] = "esm-1", "orders-fn", "orders"
		a["esm_update_interval"] = "1m"
	})
}

// figures publishes a minute of the function's figures as AWS does: the
// mean Duration of an invocation (ms), the invocations and the queue's
// deleted messages in the minute (Sum).
func (r *rig) figures(durationMS, invocations, deleted float64) {
	r.metrics.setLive(loop.DurationMetric, liveMetric{value: durationMS})
	r.metrics.setLive(loop.InvocationsMetric, liveMetric{value: invocations})
	r.metrics.setLive(loop.DeletedMetric, liveMetric{value: deleted})
}

// A foreign consumer: batches of 10 messages (600 deleted in 60
// invocations a minute) that take 2 s each. The allowed rate 100 msg/s
// needs ceil(100 × 2 / 10) = 20 instances (no headroom: no pacer takes
// the rest), 300 msg/s 60; the processed rate the controller is told is
// the deleted messages' 10 msg/s.
func TestTickForeignMappingSizedFromFunctionFigures(t *testing.T) {
	r, m := foreignRig(t)
	r.figures(2000, 60, 600)
	for _, c := range []struct {
		rate float64
		want int
	}{{100, 20}, {300, 60}} {
		r.allowForeign(c.rate)
		rep := r.tick("orders")
		if rep.Mapping == nil || rep.Mapping.BatchSeconds != 2 || rep.Mapping.BatchSize != 10 || !rep.Mapping.Foreign {
			t.Fatalf("at %v msg/s: mapping report %+v; want the function's figures (2 s, 10 messages, foreign)", c.rate, rep.Mapping)
		}
		if m.value != c.want || rep.Mapping.Target != c.want {
			t.Errorf("at %v msg/s: MaximumConcurrency %d, target %d; want %d", c.rate, m.value, rep.Mapping.Target, c.want)
		}
		if !rep.ProcessedKnown || rep.Processed != 10 {
			t.Errorf("at %v msg/s: processed %v (known %v); want the deleted messages' 10 msg/s", c.rate, rep.Processed, rep.ProcessedKnown)
		}
	}
	// Without invocations the batch size is the last one measured.
	r.figures(1000, 0, 0)
	r.allowForeign(100)
	rep := r.tick("orders")
	if rep.Mapping.BatchSize != 10 || rep.Mapping.BatchSeconds != 1 || m.value != 10 {
		t.Errorf("no invocations: report %+v, MaximumConcurrency %d; want batch size 10 kept, 1 s, 10 instances", rep.Mapping, m.value)
	}
}

// The figures of a function whose consumer reports leases are not used:
// the leases size the mapping, with the pacer's headroom.
func TestTickForeignFiguresIgnoredWithLeases(t *testing.T) {
	r, m := foreignRig(t)
	r.figures(2000, 60, 600)
	var inst protocol.BatchCount
	r.batches("i-1", &inst, 6, 10, 0.5)
	r.allowForeign(400)
	rep := r.tick("orders")
	if rep.Mapping.Foreign || rep.Mapping.BatchSeconds != 0.5 || m.value != 25 {
		t.Errorf("with a lease: report %+v, MaximumConcurrency %d; want the lease's 0.5 s batches and 25 instances", rep.Mapping, m.value)
	}
}

// The floor: two instances of batches of 10 that take 2 s carry 10 msg/s.
// Below it the mapping is turned off, and on again only at 20 % above it
// (12 msg/s), so that a rate around the floor does not turn it off and on
// at every tick. After a tick that left it off the controller is not told
// the processed rate (0 is not what the destination could take).
func TestTickForeignMappingFloorHysteresis(t *testing.T) {
	r, m := foreignRig(t)
	r.figures(2000, 60, 600)
	script := []struct {
		rate float64
		off  bool
	}{
		{50, false},
		{9, true},   // below 10: off
		{11, true},  // above the floor, within the hysteresis: still off
		{10, true},  // at the floor
		{13, false}, // 12 passed: on
		{11, false}, // above the floor: stays on
		{10, false}, // at the floor: two instances carry it
		{9.5, true}, // below: off again
	}
	wasOff := false
	for _, s := range script {
		r.allowForeign(s.rate)
		rep := r.tick("orders")
		if rep.Mapping == nil || rep.Mapping.Disabled != s.off || m.enabled == s.off {
			t.Fatalf("at %v msg/s: mapping report %+v, enabled %v; want off %v", s.rate, rep.Mapping, m.enabled, s.off)
		}
		if rep.Mapping.FloorRate != 10 {
			t.Errorf("at %v msg/s: floor rate %v; want 10", s.rate, rep.Mapping.FloorRate)
		}
		// The tick that turns the mapping off still counts the minute
		// it was on.
		if want := !wasOff; rep.ProcessedKnown != want || want && rep.Processed != 10 {
			t.Errorf("at %v msg/s: processed %v (known %v); want known %v (10 msg/s)", s.rate, rep.Processed, rep.ProcessedKnown, want)
		}
		wasOff = s.off
	}
	if want := []bool{false, true, false}; !equalBools(m.switches, want) {
		t.Errorf("switches %v; want %v (off, on, off)", m.switches, want)
	}
	st, err := r.store.ReadState(context.Background(), "orders")
	if err != nil || !st.Mapping.Disabled || !st.Mapping.Floor {
		t.Errorf("STATE mapping %+v, %v; want off for the floor", st.Mapping, err)
	}
}

// A deleted count whose minute began before the mapping was turned on
// again (CloudWatch's figures arrive late) is partly the time off: the
// controller is not told it, and is told the first minute wholly after.
func TestTickForeignCountBeforeTheSwitchIsNotTheRate(t *testing.T) {
	r, m := foreignRig(t)
	r.figures(2000, 60, 600)
	r.allowForeign(5)
	r.tick("orders") // off: below the floor of 10 msg/s
	r.allowForeign(20)
	if rep := r.tick("orders"); !rep.Mapping.Switched || !m.enabled {
		t.Fatalf("report %+v; want the mapping turned on", rep.Mapping)
	}
	// Each minute's count read 30 s after it ended.
	r.metrics.setLive(loop.DeletedMetric, liveMetric{value: 600, age: 30 * time.Second})
	if rep := r.tick("orders"); rep.ProcessedKnown {
		t.Errorf("a minute that began 30 s before the switch: processed %v known; want unknown", rep.Processed)
	}
	if rep := r.tick("orders"); !rep.ProcessedKnown || rep.Processed != 10 {
		t.Errorf("the first minute after the switch: processed %v (known %v); want 10", rep.Processed, rep.ProcessedKnown)
	}
}

// In shadow mode the floor is computed and reported, the mapping is left
// as it is.
func TestTickForeignFloorInShadowModeActsNot(t *testing.T) {
	r, m := foreignRig(t)
	r.figures(2000, 60, 600)
	r.params("orders", func(a map[string]any) {
		a["mode"], a["manual_rate"], a["min_rate"], a["max_rate"] = "shadow", 5.0, 0.0, 100000.0
		a["esm_uuid"], a["esm_function"], a["esm_queue"] = "esm-1", "orders-fn", "orders"
	})
	rep := r.tick("orders")
	if len(m.switches) != 0 || rep.Mapping.Disabled {
		t.Errorf("shadow mode: switches %v, report %+v; want the mapping left on", m.switches, rep.Mapping)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDecodeParamsForeignMapping(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["esm_uuid"], a["esm_function"], a["depth_queue"] = "a1b2", "orders-fn", "orders"
	}), looptest.Sources())
	if err != nil || p.Mapping == nil || p.Mapping.Function != "orders-fn" || p.MappingQueue() != "orders" {
		t.Fatalf("esm_function with depth_queue: Mapping %+v, queue %q, %v; want the function and depth_queue's queue", p.Mapping, p.MappingQueue(), err)
	}
	back, err := loop.DecodeParams("orders", p.Attrs(looptest.Sources()), looptest.Sources())
	if err != nil || *back.Mapping != *p.Mapping {
		t.Errorf("round trip: %+v, %v; want %+v", back.Mapping, err, p.Mapping)
	}
	for _, c := range []struct {
		name  string
		edit  func(a map[string]any)
		field string
		says  string
	}{
		{"no queue", func(a map[string]any) { a["esm_uuid"], a["esm_function"] = "a1b2", "orders-fn" }, "esm_function", "esm_queue"},
		{"kafka", func(a map[string]any) {
			a["esm_uuid"], a["esm_function"], a["esm_queue"], a["esm_kind"] = "a1b2", "orders-fn", "orders", "kafka"
		}, "esm_function", "sqs"},
		{"no mapping", func(a map[string]any) { a["esm_function"], a["esm_queue"] = "orders-fn", "orders" }, "esm_function", "esm_uuid"},
		{"blank function", func(a map[string]any) { a["esm_uuid"], a["esm_function"], a["esm_queue"] = "a1b2", " ", "orders" }, "esm_function", "empty"},
		{"an ARN", func(a map[string]any) {
			a["esm_uuid"], a["esm_function"], a["esm_queue"] = "a1b2", "orders-fn", "arn:aws:sqs:us-east-1:1:orders"
		}, "esm_queue", "name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loop.DecodeParams("orders", valid(c.edit), looptest.Sources())
			wantRefused(t, err, c.field, c.says)
		})
	}
}
