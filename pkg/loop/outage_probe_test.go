package loop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// probingMapping is a switching mapping whose consumer function answers
// the controller's probes of the destination: up, or down, or the
// invocation fails (err).
type probingMapping struct {
	*switchingMapping
	up     bool
	err    error
	probes int
}

func (p *probingMapping) ProbeDestination(context.Context, string) (bool, error) {
	p.probes++
	return p.up, p.err
}

var _ loop.MappingProber = (*probingMapping)(nil)

// probeRig is outageRig with a mapping that answers probes.
func probeRig(t *testing.T, kind string) (*rig, *probingMapping) {
	r, m := outageRig(t, 100, "manual", kind)
	p := &probingMapping{switchingMapping: m}
	r.ticker.Mappings = p
	return r, p
}

// A 15-minute outage behind an SQS Lambda whose function answers probes:
// the tick after the stall turns the mapping off, and the probes 2, 6 and
// 14 minutes later ask the function about its destination without turning
// the mapping on (down: the hold stays, the wait doubles). The first probe
// after the outage answers up and ends the hold: the mapping is on for the
// stalled tick only, and no message is received by a probe.
func TestTickOutageProbesTheDestinationWithoutReceiving(t *testing.T) {
	r, m := probeRig(t, "sqs")
	long := r.clock.now.Add(-time.Hour)
	var stored int64
	for range 3 {
		stored += 6000
		r.work("i-1", stored, long)
		r.tick("orders")
	}
	outageEnd := r.clock.now.Add(15 * time.Minute)
	onDuringOutage, downs := 0, 0
	for range 40 {
		inOutage := r.clock.now.Before(outageEnd)
		m.up = !inOutage
		if m.enabled && inOutage {
			r.work("i-1", stored, long)
			onDuringOutage++
		}
		before := m.probes
		rep := r.tick("orders")
		if rep.Mapping == nil || rep.Mapping.Err != "" || rep.Mapping.Probing {
			t.Fatalf("at %s: mapping report %+v; want no receiving probe", r.clock.now, rep.Mapping)
		}
		if m.probes > before && !m.up {
			downs++
			if !rep.Mapping.Held || rep.Mapping.Probe != loop.ProbeDown {
				t.Fatalf("at %s: a probe answered down, report %+v; want held, probe %q", r.clock.now, rep.Mapping, loop.ProbeDown)
			}
		}
		if !inOutage && !r.state("orders").Mapping.Held {
			if rep.Mapping.Probe != loop.ProbeUp {
				t.Errorf("the hold ended with probe %q; want %q", rep.Mapping.Probe, loop.ProbeUp)
			}
			break
		}
	}
	if want := []bool{false, true}; len(m.switches) != 2 || m.switches[0] != want[0] || m.switches[1] != want[1] {
		t.Fatalf("switches %v; want %v (off at the stall, on when a probe answered up)", m.switches, want)
	}
	if onDuringOutage != 1 || downs != 3 {
		t.Errorf("on for %d ticks of the outage (want the stalled one), %d probes answered down (want 3: at 2, 6 and 14 minutes)", onDuringOutage, downs)
	}
	if st := r.state("orders"); st.Mapping.Held || st.Mapping.Disabled {
		t.Errorf("STATE mapping after the outage %+v; want neither held nor disabled", st.Mapping)
	}
}

// A probe that cannot be made (the invocation fails: no permission, a
// function that does not know probes) falls back to the probe that turns
// the mapping on for one tick, and says why; so does a Kafka mapping,
// whose function answers no probe and is never invoked for one.
func TestTickOutageProbeFallsBackToReceiving(t *testing.T) {
	for _, kind := range []string{"sqs", "kafka"} {
		t.Run(kind, func(t *testing.T) {
			r, m := probeRig(t, kind)
			m.err = errors.New("AccessDeniedException")
			long := r.clock.now.Add(-time.Hour)
			r.work("i-1", 100, long)
			r.tick("orders")
			var probing *loop.MappingReport
			for range 6 {
				r.work("i-1", 100, long)
				if rep := r.tick("orders"); rep.Mapping != nil && rep.Mapping.Probing {
					probing = rep.Mapping
					break
				}
			}
			if probing == nil {
				t.Fatalf("no receiving probe; switches %v", m.switches)
			}
			if kind == "kafka" && (m.probes != 0 || probing.Probe != "") {
				t.Errorf("kafka: %d direct probes, report probe %q; want none", m.probes, probing.Probe)
			}
			if kind == "sqs" && (m.probes != 1 || probing.Probe != loop.ProbeUnavailable || probing.ProbeErr == "") {
				t.Errorf("sqs: %d direct probes, report %+v; want 1, probe %q with its error", m.probes, probing, loop.ProbeUnavailable)
			}
			if !m.enabled {
				t.Errorf("the fallback probe left the mapping off")
			}
		})
	}
}
