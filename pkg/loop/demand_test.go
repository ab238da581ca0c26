package loop_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// report writes consumer instance id's lease with its running count.
func (r *rig) report(id, instance string, stored int64, started time.Time) {
	r.t.Helper()
	now := r.clock.now
	p := protocol.Peer{Loop: id, Instance: instance, Stored: stored, StartedAt: started, ReportedAt: now, ExpiresAt: now.Add(90 * time.Second)}
	if err := r.store.ReportPeer(context.Background(), p); err != nil {
		r.t.Fatal(err)
	}
}

func TestTickPassesTheProcessedRate(t *testing.T) {
	r := newRig(t)
	r.params("orders", func(a map[string]any) {
		a["ff_gain"], a["ff_base"] = 0.05, 10.0
		a["kp"], a["ki"], a["max_rate"], a["min_rate"] = 20.0, 0.001, 3000.0, 0.0
	})
	r.cpu("orders", 30, 30*time.Second) // an empty queue: the CPU stays low
	start := r.clock.now
	var rep loop.Report
	var stored int64
	for i := range 20 {
		stored += 400 * 60
		rep = r.tick("orders")
		if i == 0 && rep.ProcessedKnown {
			t.Fatalf("first tick: %+v; want the processed rate unknown (no baseline)", rep)
		}
		r.report("orders", "i-1", stored, start)
	}
	if !rep.ProcessedKnown || math.Abs(rep.Processed-400) > 1e-9 || rep.LivePeers != 1 {
		t.Fatalf("report = processed %v (known %v), live %d; want 400 msg/s from one peer", rep.Processed, rep.ProcessedKnown, rep.LivePeers)
	}
	// 400 msg/s taken of the model's 1,200: held there, not wound up to
	// max_rate by the 40 points of error an empty queue causes.
	if !rep.DemandLimited || rep.Rate > 1250 {
		t.Errorf("rate %v, demand-limited %v; want held near 1200 msg/s", rep.Rate, rep.DemandLimited)
	}
	st, err := r.store.ReadState(context.Background(), "orders")
	if err != nil || !st.Demand.Known || !st.Demand.Limited || st.Demand.Stored["i-1"] != stored-400*60 {
		t.Errorf("STATE demand = %+v, %v; want the figure, the hold and the baseline recorded", st.Demand, err)
	}
}

func TestTickWithoutReportsRunsOnTheCPUAlone(t *testing.T) {
	r := newRig(t)
	r.params("orders", func(a map[string]any) {
		a["ff_gain"], a["ff_base"] = 0.05, 10.0
		a["kp"], a["ki"], a["max_rate"], a["min_rate"] = 20.0, 0.001, 3000.0, 0.0
	})
	r.cpu("orders", 30, 30*time.Second)
	var rep loop.Report
	for range 20 {
		rep = r.tick("orders")
	}
	if rep.ProcessedKnown || rep.DemandLimited || rep.Rate < 1900 {
		t.Errorf("report %+v; want no processed figure and the rate raised by the error", rep)
	}
}

func TestTickReadsTheQueueDepthInOneBatch(t *testing.T) {
	r := newRig(t)
	for _, id := range []string{"a", "b", "c"} {
		r.params(id, func(a map[string]any) {
			if id != "c" {
				a["depth_queue"] = "q-" + id
			}
		})
		r.cpu(id, 60, 30*time.Second)
	}
	// Depth queries carry no DBInstanceIdentifier: the fake answers them
	// all with this datapoint.
	r.metrics.set("", metric.Sample{Value: 42, Time: r.clock.now, Found: true})
	r.metrics.mu.Lock()
	r.metrics.calls = nil
	r.metrics.mu.Unlock()
	r.clock.now = r.clock.now.Add(time.Minute)
	reports, err := r.ticker.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var depthCalls int
	for _, c := range r.metrics.calls {
		if c[0].Namespace == loop.DepthNamespace {
			depthCalls++
			if len(c) != 2 || c[0].Dimensions[loop.DepthDimension] != "q-a" || c[1].Dimensions[loop.DepthDimension] != "q-b" {
				t.Errorf("depth batch = %+v; want the queues of a and b", c)
			}
		}
	}
	if depthCalls != 1 {
		t.Errorf("depth reads = %d; want 1 batch for every loop", depthCalls)
	}
	for _, rep := range reports {
		if want := rep.Loop != "c"; rep.DepthKnown != want || want && rep.Depth != 42 {
			t.Errorf("loop %s: depth %v (known %v); want known %v (42)", rep.Loop, rep.Depth, rep.DepthKnown, want)
		}
	}
}
