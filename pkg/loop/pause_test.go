package loop_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

// switchingMapping is a fakeMapping that can also be turned off and on; it
// records every switch.
type switchingMapping struct {
	*fakeMapping
	smu      sync.Mutex
	enabled  bool
	switches []bool
	failNext error // returned by the next switch, then cleared
}

func (s *switchingMapping) SetMappingEnabled(_ context.Context, _ string, on bool) error {
	s.smu.Lock()
	defer s.smu.Unlock()
	if err := s.failNext; err != nil {
		s.failNext = nil
		return err
	}
	s.enabled = on
	s.switches = append(s.switches, on)
	return nil
}

var _ loop.MappingSwitch = (*switchingMapping)(nil)

// pauseRig is a rig with an auto loop "orders" with a model, which owns a
// mapping of kind kind.
func pauseRig(t *testing.T, kind string) (*rig, *switchingMapping) {
	r := newRig(t)
	m := &switchingMapping{fakeMapping: &fakeMapping{value: 10, clock: r.clock}, enabled: true}
	r.ticker.Mappings = m
	r.setPaused(false, kind)
	return r, m
}

// setPaused writes PARAMS orders with paused set to on.
func (r *rig) setPaused(on bool, kind string) {
	r.params("orders", func(a map[string]any) {
		a["ff_gain"], a["ff_base"], a["setpoint_filter"] = 0.05, 10.0, "3m"
		a["esm_uuid"], a["esm_kind"] = "esm-1", kind
		if on {
			a[loop.AttrPaused] = true
		}
	})
}

// A 30-minute pause on the production tick: every paused tick writes RATE
// 0, the mapping is turned off once at the first and on once at the resume,
// the controller's memory does not move while paused (no windup against a
// destination that takes nothing), and the first tick after the resume
// gives the rate a loop that never ran gives at its first tick on the same
// measurement (the model's rate): bumpless.
func TestTickPauseHoldsRateZeroAndResumesAtTheModelsRate(t *testing.T) {
	for _, kind := range []string{"sqs", "kafka"} {
		t.Run(kind, func(t *testing.T) {
			r, m := pauseRig(t, kind)
			r.cpu("orders", 40, 30*time.Second)
			for range 10 {
				r.tick("orders")
			}
			before := r.state("orders")
			r.setPaused(true, kind)
			r.cpu("orders", 12, 30*time.Second) // idle while paused
			for i := range 30 {
				rep := r.tick("orders")
				rate, err := r.store.ReadRate(context.Background(), "orders")
				if err != nil || rate.PerSecond != 0 || !rep.Paused || rep.Rate != 0 {
					t.Fatalf("paused tick %d: report %+v, RATE %+v, %v; want paused and RATE 0", i, rep, rate, err)
				}
				if rep.Reason == nil || rep.Reason.Code != loop.ReasonPaused {
					t.Fatalf("paused tick %d: reason %+v; want %q", i, rep.Reason, loop.ReasonPaused)
				}
			}
			during := r.state("orders")
			if !during.Paused || during.Signals[0].Controller.Integral != before.Signals[0].Controller.Integral {
				t.Errorf("STATE after 30 paused ticks: paused %v, integral %v; want paused and the integral before the pause, %v",
					during.Paused, during.Signals[0].Controller.Integral, before.Signals[0].Controller.Integral)
			}
			if len(m.switches) != 1 || m.switches[0] || m.enabled {
				t.Fatalf("switches while paused %v; want the mapping turned off once", m.switches)
			}
			r.setPaused(false, kind)
			// "fresh" has the same parameters and model and never ran.
			r.params("fresh", func(a map[string]any) { a["ff_gain"], a["ff_base"], a["setpoint_filter"] = 0.05, 10.0, "3m" })
			r.cpu("fresh", 12, 30*time.Second)
			reps := r.tickAll()
			resumed, first := reps["orders"], reps["fresh"]
			if !resumed.Resumed || resumed.Paused || resumed.Rate != first.Rate || resumed.Rate <= 0 {
				t.Errorf("resume: rate %v (resumed %v, paused %v); want %v, a fresh loop's first rate at the same measurement",
					resumed.Rate, resumed.Resumed, resumed.Paused, first.Rate)
			}
			if len(m.switches) != 2 || !m.switches[1] || !m.enabled {
				t.Errorf("switches %v; want off at the pause and on at the resume", m.switches)
			}
			if kind == "kafka" && (m.gets != 0 || len(m.sets) != 0) {
				t.Errorf("kafka mapping: %d reads and %d sets of MaximumConcurrency; want none", m.gets, len(m.sets))
			}
		})
	}
}

// A mapping that refuses to be turned off is tried again at every tick, and
// RATE is 0 meanwhile; the failure is in the report and in STATE until the
// switch works.
func TestTickPauseRetriesTheMappingSwitch(t *testing.T) {
	r, m := pauseRig(t, "sqs")
	r.cpu("orders", 40, 30*time.Second)
	r.tick("orders")
	m.failNext = errors.New("ResourceInUseException")
	r.setPaused(true, "sqs")
	rep := r.tick("orders")
	if rep.Mapping == nil || rep.Mapping.Err == "" || rep.Rate != 0 || !rep.RateWritten {
		t.Fatalf("failed switch: report %+v, mapping %+v; want RATE 0 written and the error reported", rep, rep.Mapping)
	}
	if st := r.state("orders"); st.Mapping.Error == "" || st.Mapping.Disabled {
		t.Errorf("STATE mapping %+v; want the error recorded and the mapping not disabled yet", st.Mapping)
	}
	rep = r.tick("orders")
	if !rep.Mapping.Switched || !rep.Mapping.Disabled || len(m.switches) != 1 || m.switches[0] {
		t.Errorf("next tick: mapping %+v, switches %v; want it turned off", rep.Mapping, m.switches)
	}
	if st := r.state("orders"); st.Mapping.Error != "" || !st.Mapping.Disabled {
		t.Errorf("STATE mapping %+v; want disabled, no error", st.Mapping)
	}
}

// A paused loop cannot be disabled: enabled false hands the consumers to
// their safe rate, which would end the pause without a resume. The edit is
// refused with the reason, and the pause stays in force.
func TestParamsPausedAndDisabledRefused(t *testing.T) {
	_, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a[loop.AttrPaused], a["enabled"] = true, false
	}), looptest.Sources())
	wantRefused(t, err, loop.AttrPaused, "resume it first")
	_, err = loop.DecodeParams("orders", valid(func(a map[string]any) { a["esm_kind"] = "kafka" }), looptest.Sources())
	wantRefused(t, err, "esm_kind", "set esm_uuid first")
	_, err = loop.DecodeParams("orders", valid(func(a map[string]any) { a["esm_uuid"], a["esm_kind"] = "u", "kinesis" }), looptest.Sources())
	wantRefused(t, err, "esm_kind", "want sqs or kafka")
	p, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
		a[loop.AttrPaused], a["esm_uuid"], a["esm_kind"] = true, "u", "kafka"
	}), looptest.Sources())
	if err != nil || !p.Paused || p.Mapping.Kind != loop.MappingKafka {
		t.Fatalf("DecodeParams = %+v, %v; want paused with a kafka mapping", p, err)
	}
	wantRoundTrip(t, "paused, kafka mapping", p)
}

// state reads loop id's STATE.
func (r *rig) state(id string) loop.State {
	r.t.Helper()
	st, err := r.store.ReadState(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

// tickAll advances the clock by one minute, ticks, and returns every
// loop's report by loop id.
func (r *rig) tickAll() map[string]loop.Report {
	r.t.Helper()
	r.clock.now = r.clock.now.Add(time.Minute)
	reports, err := r.ticker.Tick(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]loop.Report{}
	for _, rep := range reports {
		out[rep.Loop] = rep
	}
	return out
}
