package loop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// outageRig is a manual loop at rate msg/s that owns an SQS mapping which
// can be switched.
func outageRig(t *testing.T, rate float64, mode, kind string) (*rig, *switchingMapping) {
	r := newRig(t)
	m := &switchingMapping{fakeMapping: &fakeMapping{value: 10, clock: r.clock}, enabled: true}
	r.ticker.Mappings = m
	r.cpu("orders", 50, 30*time.Second)
	r.params("orders", func(a map[string]any) {
		a["mode"], a["manual_rate"], a["min_rate"], a["max_rate"] = mode, rate, 0.0, 1000.0
		a["esm_uuid"], a["esm_kind"] = "esm-1", kind
	})
	return r, m
}

// work writes instance's lease half a minute into the coming tick's
// interval with its running stored count; its settled count grows by one
// a minute more (a poison message dead-lettered every minute, outage or
// not).
func (r *rig) work(instance string, stored int64, started time.Time) {
	r.t.Helper()
	at := r.clock.now.Add(30 * time.Second)
	poison := int64(at.Sub(started) / time.Minute)
	p := protocol.Peer{Loop: "orders", Instance: instance, Stored: stored, StartedAt: started, ReportedAt: at, ExpiresAt: at.Add(15 * time.Second),
		Batches: stored + poison, BatchMessages: stored + poison, Working: time.Duration(stored+poison) * time.Millisecond}
	if err := r.store.ReportPeer(context.Background(), p); err != nil {
		r.t.Fatal(err)
	}
}

// A 15-minute outage of the destination behind an SQS or a Kafka Lambda:
// the consumers receive and store nothing. The tick after the stall turns the
// mapping off, probes it on for one tick 2 minutes later, then 4, then 8
// (each probe's new instance stores nothing), and the first probe after
// the outage, which stores, ends the hold. During the outage the mapping
// is on for the two probe ticks only, so each message is received about
// once per probe: never the five receives that dead-letter it.
func TestTickOutageHoldsTheMappingOffAndProbes(t *testing.T) {
	for _, kind := range []string{"sqs", "kafka"} {
		for _, warm := range []bool{false, true} {
			t.Run(kind+"/"+map[bool]string{false: "new instances", true: "one warm instance"}[warm], func(t *testing.T) { outageProbes(t, kind, warm) })
		}
	}
}

// outageProbes plays the 15-minute outage; warm: every probe runs the
// instance that ran before the outage (an emulator, a warm Lambda), idle
// for longer than the demand counts keep its baseline.
func outageProbes(t *testing.T, kind string, warm bool) {
	r, m := outageRig(t, 100, "manual", kind)
	long := r.clock.now.Add(-time.Hour)
	var stored int64
	for range 3 { // healthy
		stored += 6000
		r.work("i-1", stored, long)
		r.tick("orders")
	}
	outageEnd := r.clock.now.Add(15 * time.Minute)
	onDuringOutage := 0
	for minute := range 30 {
		inOutage := r.clock.now.Before(outageEnd)
		if m.enabled {
			probe := fmt.Sprintf("probe-%d", minute)
			switch {
			case len(m.switches) == 0: // the outage begins: stored stays
				r.work("i-1", stored, long)
			case warm && inOutage: // the warm instance stores nothing
				r.work("i-1", stored, long)
			case warm: // and stores after the outage
				r.work("i-1", stored+60, long)
			case inOutage: // a probe's new instance stores nothing
				r.work(probe, 0, r.clock.now.Add(time.Second))
			default: // the first probe after the outage stores
				r.work(probe, 60, r.clock.now.Add(time.Second))
			}
			if inOutage {
				onDuringOutage++
			}
		}
		if rep := r.tick("orders"); rep.Mapping == nil || rep.Mapping.Err != "" {
			t.Fatalf("at %s: mapping report %+v", r.clock.now, rep.Mapping)
		}
		if !inOutage && !r.state("orders").Mapping.Held {
			break
		}
	}
	want := []bool{false, true, false, true, false, true}
	if len(m.switches) != len(want) {
		t.Fatalf("switches %v; want %v (off, probe on, off, probe on, off, on at the end)", m.switches, want)
	}
	for i := range want {
		if m.switches[i] != want[i] {
			t.Fatalf("switches %v; want %v", m.switches, want)
		}
	}
	if onDuringOutage > 3 || !m.enabled {
		t.Errorf("the mapping was on for %d ticks of the 15-minute outage (want the stalled tick and two probes: 3), on at the end %v", onDuringOutage, m.enabled)
	}
	if st := r.state("orders"); st.Mapping.Held || st.Mapping.Disabled {
		t.Errorf("STATE mapping after the outage %+v; want neither held nor disabled", st.Mapping)
	}
}

// No hold where nothing failed: a trickle (0.1 msg/s, which may store
// nothing in a minute), an empty queue (no consumer at work), and shadow
// mode, which never acts.
func TestTickOutageNotForTrickleIdleOrShadow(t *testing.T) {
	for _, c := range []struct {
		name string
		rate float64
		mode string
		work bool
	}{{"trickle", 0.1, "manual", true}, {"idle", 100, "manual", false}, {"shadow", 100, "shadow", true}} {
		t.Run(c.name, func(t *testing.T) {
			r, m := outageRig(t, c.rate, c.mode, "sqs")
			long := r.clock.now.Add(-time.Hour)
			for range 10 {
				if c.work {
					r.work("i-1", 5, long)
				}
				if rep := r.tick("orders"); rep.Mapping != nil && rep.Mapping.Held {
					t.Fatalf("held at %s: %+v", r.clock.now, rep.Mapping)
				}
			}
			if len(m.switches) != 0 {
				t.Errorf("switches %v; want none", m.switches)
			}
		})
	}
}
