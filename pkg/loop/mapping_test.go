package loop_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fakeMapping is an event source mapping that records every call.
type fakeMapping struct {
	mu    sync.Mutex
	value int
	gets  int
	sets  []mappingSet
	fail  error // returned by every call while set
	clock *fakeClock
}

type mappingSet struct {
	at time.Time
	n  int
}

func (f *fakeMapping) MaximumConcurrency(_ context.Context, uuid string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.fail != nil {
		return 0, f.fail
	}
	return f.value, nil
}

func (f *fakeMapping) SetMaximumConcurrency(_ context.Context, uuid string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.sets = append(f.sets, mappingSet{f.clock.now, n})
	f.value = n
	return nil
}

// mappingRig is a rig whose loop "orders" owns a mapping and runs in
// manual mode, so that the test scripts the allowed rate.
func mappingRig(t *testing.T, initial int) (*rig, *fakeMapping) {
	r := newRig(t)
	m := &fakeMapping{value: initial, clock: r.clock}
	r.ticker.Mappings = m
	r.cpu("orders", 50, 30*time.Second)
	r.allow(0)
	return r, m
}

// allow sets the allowed rate (manual mode) of loop orders.
func (r *rig) allow(rate float64) {
	r.params("orders", func(a map[string]any) {
		a["mode"], a["manual_rate"], a["min_rate"], a["max_rate"] = "manual", rate, 0.0, 100000.0
		a["esm_uuid"] = "esm-1"
	})
}

// batches reports that instance worked n more batches of size messages,
// each taking secs of work (its running counts are in c).
func (r *rig) batches(instance string, c *protocol.BatchCount, n int64, size int64, secs float64) {
	r.t.Helper()
	c.Batches += n
	c.Messages += n * size
	c.Working += time.Duration(float64(n) * secs * float64(time.Second))
	now := r.clock.now
	p := protocol.Peer{Loop: "orders", Instance: instance, StartedAt: now.Add(-time.Hour), ReportedAt: now, ExpiresAt: now.Add(15 * time.Second),
		Stored: c.Messages, Batches: c.Batches, BatchMessages: c.Messages, Working: c.Working}
	if err := r.store.ReportPeer(context.Background(), p); err != nil {
		r.t.Fatal(err)
	}
}

// The event source mapping on the production tick: over two simulated
// hours of allowed rates, with batches of 10 messages taking 0.5 s of work
// (N = ceil(rate × 0.5 / 10 × 1.25) = ceil(rate / 16)), the mapping's
// concurrency follows the allowed rate, changes at most once per
// esm_update_interval (5 min), ignores changes under 20 %, and is never set
// outside 2..1000, also for rates that ask for 0, 1 and 5,000 instances.
func TestTickMappingFollowsTheAllowedRate(t *testing.T) {
	r, m := mappingRig(t, 10)
	script := []struct {
		minutes int
		rate    float64
		want    int // the concurrency at the end of the segment
	}{
		{12, 400, 25},     // 400 / 16 = 25
		{12, 420, 25},     // 27 is within 20 % of 25: unchanged
		{2, 800, 50},      // 50 at the segment's first tick
		{3, 80, 50},       // 5 asked, but the last change was under 5 min ago
		{12, 80, 5},       // and then it moves
		{12, 0, 2},        // 0 instances asked: the least, 2
		{12, 16, 2},       // 1 instance asked: 2
		{12, 80000, 1000}, // 5,000 asked: the most, 1,000
		{12, 3200, 200},   // back down
	}
	var inst protocol.BatchCount
	for _, seg := range script {
		r.allow(seg.rate)
		for range seg.minutes {
			rep := r.tick("orders")
			if rep.Outcome != loop.OutcomeApplied || !rep.RateWritten || rep.Rate != seg.rate {
				t.Fatalf("at %s: report %+v; want RATE %v written", r.clock.now, rep, seg.rate)
			}
			// One minute of batches at the allowed rate (at least one
			// batch, so that the measurement goes on at rate 0 too).
			r.batches("i-1", &inst, max(int64(seg.rate*60/10), 1), 10, 0.5)
		}
		if m.value != seg.want {
			t.Errorf("after %d min at %v msg/s: MaximumConcurrency %d; want %d", seg.minutes, seg.rate, m.value, seg.want)
		}
	}
	for _, s := range m.sets {
		t.Logf("minute %3.0f: MaximumConcurrency %d", s.at.Sub(m.sets[0].at).Minutes(), s.n)
	}
	for i, s := range m.sets {
		if s.n < 2 || s.n > 1000 {
			t.Errorf("set %d: MaximumConcurrency %d; want within 2..1000", i, s.n)
		}
		if i > 0 && s.at.Sub(m.sets[i-1].at) < 5*time.Minute {
			t.Errorf("sets %d and %d %v apart; want at most one per 5 min", i-1, i, s.at.Sub(m.sets[i-1].at))
		}
	}
	if len(m.sets) != 6 || m.gets != 1 {
		t.Errorf("%d updates and %d reads: %+v; want 6 updates (one per change of the script) and 1 read", len(m.sets), m.gets, m.sets)
	}
	st, err := r.store.ReadState(context.Background(), "orders")
	if err != nil || st.Mapping.Concurrency != 200 || !st.Mapping.UpdatedAt.Equal(m.sets[len(m.sets)-1].at) || st.Mapping.Error != "" {
		t.Errorf("STATE mapping = %+v, %v; want concurrency 200 and the last update's time", st.Mapping, err)
	}
}

func TestTickMappingWaitsForBatchReports(t *testing.T) {
	r, m := mappingRig(t, 10)
	r.allow(400)
	for range 10 {
		rep := r.tick("orders")
		if rep.Mapping == nil || rep.Mapping.Target != 0 || rep.Mapping.Updated {
			t.Fatalf("report mapping %+v; want the mapping known, no target, not updated", rep.Mapping)
		}
	}
	if m.gets+len(m.sets) != 0 {
		t.Errorf("%d reads, %d updates without a batch report; want none", m.gets, len(m.sets))
	}
}

func TestTickMappingFailureKeepsPacing(t *testing.T) {
	r, m := mappingRig(t, 10)
	m.fail = errors.New("AccessDeniedException: not authorized")
	r.allow(400)
	var inst protocol.BatchCount
	r.tick("orders")
	r.batches("i-1", &inst, 240, 10, 0.5)
	rep := r.tick("orders")
	if rep.Mapping == nil || rep.Mapping.Err == "" || rep.Mapping.Updated || !rep.RateWritten {
		t.Fatalf("report %+v, mapping %+v; want the failure reported and RATE written", rep, rep.Mapping)
	}
	rate, err := r.store.ReadRate(context.Background(), "orders")
	if err != nil || rate.PerSecond != 400 {
		t.Errorf("RATE = %+v, %v; want 400 msg/s: the consumers keep pacing", rate, err)
	}
	st, _ := r.store.ReadState(context.Background(), "orders")
	if st.Mapping.Error == "" || !st.Mapping.ErrorAt.Equal(r.clock.now) {
		t.Errorf("STATE mapping = %+v; want the error and its time", st.Mapping)
	}
	failedAt := r.clock.now
	m.fail = nil
	for r.clock.now.Sub(failedAt) < 5*time.Minute {
		r.batches("i-1", &inst, 240, 10, 0.5)
		rep = r.tick("orders")
		if rep.Mapping.Updated != (r.clock.now.Sub(failedAt) >= 5*time.Minute) {
			t.Fatalf("%v after the failure: updated %v; want the retry at the next interval", r.clock.now.Sub(failedAt), rep.Mapping.Updated)
		}
	}
	st, _ = r.store.ReadState(context.Background(), "orders")
	if m.value != 25 || st.Mapping.Error != "" || st.Mapping.Concurrency != 25 {
		t.Errorf("after the retry: mapping %d, STATE %+v; want 25 and the error cleared", m.value, st.Mapping)
	}
}

func TestTickMappingLeftAloneInShadowAndWithoutOne(t *testing.T) {
	r, m := mappingRig(t, 10)
	r.params("orders", func(a map[string]any) {
		a["mode"], a["esm_uuid"], a["min_rate"], a["max_rate"] = "shadow", "esm-1", 0.0, 100000.0
	})
	r.params("worker", nil) // an ECS worker's loop: no esm_uuid
	r.cpu("worker", 50, 30*time.Second)
	var inst protocol.BatchCount
	for range 10 {
		r.batches("i-1", &inst, 100, 10, 0.5)
		if rep := r.tick("worker"); rep.Mapping != nil {
			t.Fatalf("loop without esm_uuid: report mapping %+v; want nil", rep.Mapping)
		}
	}
	if rep := r.tick("orders"); rep.Mapping == nil || rep.Mapping.Target == 0 {
		t.Errorf("shadow: report mapping %+v; want the target computed", rep.Mapping)
	}
	if m.gets+len(m.sets) != 0 {
		t.Errorf("%d reads, %d updates; want none in shadow mode", m.gets, len(m.sets))
	}
}

// An edit of esm_uuid names another mapping: its value is read before
// anything is set, without waiting for the interval of the other mapping.
func TestTickMappingEditOfTheUUIDStartsOver(t *testing.T) {
	r, m := mappingRig(t, 10)
	r.allow(400)
	var inst protocol.BatchCount
	r.tick("orders")
	r.batches("i-1", &inst, 240, 10, 0.5)
	if rep := r.tick("orders"); !rep.Mapping.Updated || m.value != 25 {
		t.Fatalf("report mapping %+v, mapping %d; want 25 set", rep.Mapping, m.value)
	}
	m.value = 25 // the other mapping happens to run at 25 already
	r.params("orders", func(a map[string]any) {
		a["mode"], a["manual_rate"], a["min_rate"], a["max_rate"] = "manual", 800.0, 0.0, 100000.0
		a["esm_uuid"] = "esm-2"
	})
	r.batches("i-1", &inst, 240, 10, 0.5)
	rep := r.tick("orders")
	if !rep.Mapping.Updated || rep.Mapping.UUID != "esm-2" || m.value != 50 || m.gets != 2 {
		t.Errorf("report mapping %+v, mapping %d after %d reads; want esm-2 read and set to 50 at once", rep.Mapping, m.value, m.gets)
	}
}
