package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// The control law through the production tick: what probing it found,
// each as the scenario that showed it.

// slowPlant is a destination that reacts in minutes (lag 120 s, dead time
// 30 s): the loop dead time with 60 s averages published 90 s late is about
// 180 s.
var slowPlant = control.FOPDT{Gain: 0.05, Base: 10, Tau: 120 * time.Second, DeadTime: 30 * time.Second}

func TestTickStaleResumeDoesNotOvershoot(t *testing.T) {
	for _, policy := range []string{"fail-closed", "decay"} {
		t.Run(policy, func(t *testing.T) {
			const setpoint = 60.0
			pl := newPlantLoop(t, slowPlant, slowPlant.Input(setpoint), time.Minute, 90*time.Second)
			pl.params(func(a map[string]any) {
				// ki by the delay-aware rule: 1/(gain x loop dead time).
				a["setpoint"], a["kp"], a["ki"] = setpoint, 4.0, 0.11
				a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"], a["delay_aware"] = 0.05, 10.0, "2m", "30s", true
				a["min_rate"], a["max_rate"], a["stale_policy"] = 10.0, 3000.0, policy
			})
			for range 30 {
				pl.step()
			}
			pl.outage = true // six ticks without a datapoint
			for range 6 {
				if rep, _ := pl.step(); !rep.Stale {
					t.Fatalf("tick without a datapoint not stale: %+v", rep)
				}
			}
			pl.outage = false
			peak := 0.0
			for range 30 {
				_, p := pl.step()
				peak = max(peak, p)
			}
			t.Logf("%s: peak CPU after the resume %.1f %%", policy, peak)
			if peak > setpoint+1 {
				t.Errorf("peak CPU after the resume %.1f %%; want at most the setpoint + 1 = %.0f %%", peak, setpoint+1)
			}
		})
	}
}

// ticksToLeave runs a loop at max_rate first for 30 ticks, then (when it
// differs) at max_rate then for 5 more, makes the CPU jump 20 points above the
// setpoint, and returns how many ticks the rate then stays at the bound.
// extra edits the PARAMS.
func ticksToLeave(t *testing.T, aw string, extra func(a map[string]any), first, then float64) int {
	t.Helper()
	m := control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	pl := newPlantLoop(t, m, 800, time.Minute, 90*time.Second)
	var sp float64
	set := func(maxRate float64) {
		pl.params(func(a map[string]any) {
			a["min_rate"], a["max_rate"], a["anti_windup"] = 10.0, maxRate, aw
			a["kp"], a["ki"] = 0.5, 1/(0.05*155)
			extra(a)
			sp = a["setpoint"].(float64)
		})
	}
	set(first)
	for range 30 {
		pl.step()
	}
	if then != first {
		set(then)
		for range 5 {
			pl.step()
		}
	}
	if rep, _ := pl.step(); rep.Rate != then {
		t.Fatalf("%s: rate %v before the disturbance; want it held at max_rate %v", aw, rep.Rate, then)
	}
	pl.dist = sp + 20 - m.Output(then)
	for n := range 60 {
		if rep, _ := pl.step(); rep.Rate < then {
			return n
		}
	}
	t.Fatalf("%s: the rate never left max_rate %v", aw, then)
	return 0
}

func TestTickLeavesTheBoundLikeBackCalculation(t *testing.T) {
	for _, tc := range []struct {
		name        string
		extra       func(a map[string]any)
		first, then float64
	}{
		// The model asks for 1,200 msg/s at the setpoint 70.
		{"feedforward above max_rate", func(a map[string]any) {
			a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"], a["delay_aware"] = 0.05, 10.0, "15s", "5s", true
		}, 500, 500},
		// At 1,000 msg/s the CPU is 60 %, far below the setpoint 90.
		{"max_rate lowered while saturated", func(a map[string]any) { a["setpoint"] = 90.0 }, 1000, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bc := ticksToLeave(t, "back-calculation", tc.extra, tc.first, tc.then)
			cond := ticksToLeave(t, "conditional", tc.extra, tc.first, tc.then)
			t.Logf("ticks at max_rate after the disturbance: conditional %d, back-calculation %d", cond, bc)
			if cond > bc+1 {
				t.Errorf("conditional anti-windup left max_rate after %d ticks, back-calculation after %d; want within one", cond, bc)
			}
		})
	}
}

// rampMetric publishes a datapoint every minute on a ramp of slope points per
// second; each is published age after its period ends.
type rampMetric struct {
	epoch      time.Time
	slope      float64
	age        time.Duration
	lastPeriod time.Duration
}

func (m *rampMetric) ReadMetrics(_ context.Context, qs []metric.Query, now time.Time) ([]metric.Sample, error) {
	out := make([]metric.Sample, len(qs))
	for i, q := range qs {
		end := now.Add(-m.age).Truncate(q.Period)
		out[i] = metric.Sample{Value: 20 + m.slope*end.Sub(m.epoch).Seconds(), Time: end.Add(-q.Period), Found: true}
	}
	return out, nil
}

func TestTickDerivativeAfterMissedSchedule(t *testing.T) {
	const slope, kd = 0.01, 100.0
	r := newRig(t)
	r.ticker.Metrics[cwmetric.Name] = &rampMetric{epoch: r.clock.now, slope: slope, age: 90 * time.Second}
	r.params("a", func(a map[string]any) { a["kd"] = kd })
	for range 10 {
		r.tick("a")
	}
	// The schedule misses nine invocations: the next tick comes ten minutes
	// after the last one.
	r.clock.now = r.clock.now.Add(9 * time.Minute)
	rep := r.tick("a")
	t.Logf("derivative after the missed schedule %v per s (slope %v)", -rep.D/kd, slope)
	if got := -rep.D / kd; math.Abs(got-slope) > 0.05*slope {
		t.Fatalf("derivative after a missed schedule = %v per s; want the slope %v within 5%%", got, slope)
	}
}

func TestStateCloneIsDeep(t *testing.T) {
	ff := control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	ctrl := control.Controller{Config: control.Config{Kp: 1, Ki: 0.05, Min: 0, Max: 3000, Feedforward: &ff, DelayAware: true}}
	in := func(y float64) control.Input {
		return control.Input{Setpoint: 70, Measurement: y, MeasurementAge: 90 * time.Second, MeasurementPeriod: time.Minute,
			SamplingInterval: time.Minute, ActualRate: 100, ActualKnown: true}
	}
	for k := range 5 {
		ctrl.Update(in(50 + float64(k)))
	}
	cs := ctrl.State
	// Room to grow in place, as a slice that was appended to has.
	cs.Applied = append(make([]control.Segment, 0, len(cs.Applied)+8), cs.Applied...)
	cs.Reference = append(make([]control.Segment, 0, len(cs.Reference)+8), cs.Reference...)
	p := loop.Params{Loop: "a", Feedforward: &ff, Sensing: loop.Sensing{Metric: metric.Query{Dimensions: map[string]string{"k": "v"}}}, Nodes: []loop.Node{{Name: "n"}}}
	orig := loop.State{Loop: "a", Controller: cs, Params: &p}
	before, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}

	for _, path := range sharedRefs(reflect.ValueOf(orig), reflect.ValueOf(orig.Clone()), "State") {
		t.Errorf("Clone shares %s with the original", path)
	}
	// What the in-memory store did: a tick updates its clone in place.
	c := orig.Clone()
	up := control.Controller{Config: ctrl.Config, State: c.Controller}
	up.Update(in(60))
	if after, _ := json.Marshal(orig); string(after) != string(before) {
		t.Errorf("Update on a clone changed the original:\n%s\nwant\n%s", after, before)
	}
}

// sharedRefs returns the paths of the slices, maps and pointers that a and b
// both refer to (the same backing array, map or pointee).
func sharedRefs(a, b reflect.Value, path string) []string {
	var out []string
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		return append(out, sharedRefs(a.Elem(), b.Elem(), path)...)
	case reflect.Slice:
		if a.Cap() > 0 && b.Cap() > 0 && a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
		for i := range min(a.Len(), b.Len()) {
			out = append(out, sharedRefs(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		if !a.IsNil() && !b.IsNil() && a.Pointer() == b.Pointer() {
			out = append(out, path)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			out = append(out, sharedRefs(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)...)
		}
	}
	return out
}

func TestDecodeParamsRefusesOverflowingFeedforward(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gain, base float64
		field      string
	}{
		{"gain whose inverse overflows", 1e-310, 1e308, "ff_gain"},
		{"base over gain overflows", 1e-300, 1e308, "ff_base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loop.DecodeParams("a", valid(func(a map[string]any) {
				a["ff_gain"], a["ff_base"], a["delay_aware"] = tc.gain, tc.base, true
			}), looptest.Sources())
			var pe *loop.ParamsError
			if !errors.As(err, &pe) {
				t.Fatalf("DecodeParams(ff_gain %v, ff_base %v, looptest.Sources()) = %v; want a refusal", tc.gain, tc.base, err)
			}
			if !slices.ContainsFunc(pe.Fields, func(f loop.FieldError) bool { return f.Field == tc.field }) {
				t.Errorf("refusal %q does not name %s", pe.Reason(), tc.field)
			}
		})
	}
}

// An operator who lowers the rate (manual mode with a lower rate, a lower
// max_rate or setpoint) gets it at the next tick: the slew limit paces
// increases only.
func TestTickLowerRateAtTheNextTick(t *testing.T) {
	ffAttrs := func(a map[string]any) {
		a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"], a["delay_aware"] = 0.05, 10.0, "15s", "5s", true
		a["slew_limit"], a["max_rate"] = 50.0, 3000.0
	}
	t.Run("manual on a new loop", func(t *testing.T) {
		r := newRig(t)
		r.params("a", func(a map[string]any) { ffAttrs(a); a["mode"], a["manual_rate"] = "manual", 20.0 })
		r.cpu("a", 60, 90*time.Second)
		if rep := r.tick("a"); rep.Rate != 20 {
			t.Errorf("first tick of a new loop in manual at 20 msg/s: rate %v; want 20", rep.Rate)
		}
	})
	for _, tc := range []struct {
		name string
		edit func(a map[string]any)
		want func(rate float64) bool
	}{
		{"manual rate far below", func(a map[string]any) { a["mode"], a["manual_rate"] = "manual", 20.0 }, func(r float64) bool { return r == 20 }},
		{"max_rate lowered", func(a map[string]any) { a["max_rate"] = 300.0 }, func(r float64) bool { return r == 300 }},
		// The model puts the setpoint 40 at 600 msg/s.
		{"setpoint lowered", func(a map[string]any) { a["setpoint"] = 40.0 }, func(r float64) bool { return r < 700 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.params("a", ffAttrs)
			r.cpu("a", 70, 90*time.Second) // the model's CPU at 1,200 msg/s
			var before loop.Report
			for range 30 {
				before = r.tick("a")
			}
			if before.Rate < 1100 {
				t.Fatalf("rate %v before the edit; want about 1,200", before.Rate)
			}
			r.params("a", func(a map[string]any) { ffAttrs(a); tc.edit(a) })
			if rep := r.tick("a"); !tc.want(rep.Rate) {
				t.Errorf("next tick after the edit: rate %v (from %v, slew limit 50)", rep.Rate, before.Rate)
			}
		})
	}
}
