package loop_test

import (
	"context"
	"math"
	"strings"
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
			// The depth and the oldest message's age of a, then of b.
			want := []struct{ metric, queue string }{{loop.DepthMetric, "q-a"}, {loop.OldestAgeMetric, "q-a"}, {loop.DepthMetric, "q-b"}, {loop.OldestAgeMetric, "q-b"}}
			for i, q := range c {
				if len(c) != len(want) || q.Metric != want[i].metric || q.Dimensions[loop.DepthDimension] != want[i].queue {
					t.Errorf("depth batch = %+v; want the depth and age of the queues of a and b", c)
					break
				}
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

// The oldest message's age is read in the depth's batch; with the queue's
// retention known, the reason warns when that message expires before the
// backlog drains at the allowed rate.
func TestTickWarnsWhenTheOldestMessageExpiresFirst(t *testing.T) {
	const warning = "before the backlog drains: raise max_rate or the retention"
	tests := []struct {
		name      string
		age       time.Duration
		retention string // "" leaves depth_retention out
		warn      bool
	}{
		// 1e6 messages at 100 msg/s take 2 h 46 m to drain.
		{"expires first", 22 * time.Hour, "24h", true},
		{"drains first", time.Hour, "24h", false},
		{"retention unknown", 22 * time.Hour, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.params("a", func(a map[string]any) {
				a["depth_queue"], a["max_rate"], a["min_rate"] = "q-a", 100.0, 99.0
				if tt.retention != "" {
					a["depth_retention"] = tt.retention
				}
			})
			r.cpu("a", 60, 30*time.Second)
			r.metrics.set(loop.DepthMetric, metric.Sample{Value: 1e6, Time: r.clock.now, Found: true})
			r.metrics.set(loop.OldestAgeMetric, metric.Sample{Value: tt.age.Seconds(), Time: r.clock.now, Found: true})
			r.clock.now = r.clock.now.Add(time.Minute)
			rep := r.tick("a")
			if rep.Reason == nil || strings.Contains(rep.Reason.Text, warning) != tt.warn {
				t.Fatalf("reason %+v; want the expiry warning %v", rep.Reason, tt.warn)
			}
			if rep.OldestAge != tt.age {
				t.Errorf("report oldest_age %v; want %v", rep.OldestAge, tt.age)
			}
			st, err := r.store.ReadState(context.Background(), "a")
			if err != nil {
				t.Fatal(err)
			}
			wantExpires := time.Duration(0)
			if tt.retention != "" {
				wantExpires = 24*time.Hour - tt.age
			}
			if st.OldestAge != tt.age || st.ExpiresIn != wantExpires || rep.ExpiresIn != wantExpires {
				t.Errorf("STATE oldest_age %v expires_in %v, report expires_in %v; want %v, %v", st.OldestAge, st.ExpiresIn, rep.ExpiresIn, tt.age, wantExpires)
			}
			if tt.warn && !strings.Contains(rep.Reason.Text, "the oldest message (age 22 h) expires in 2 h") {
				t.Errorf("reason %q; want the age and the time left", rep.Reason.Text)
			}
		})
	}
}
