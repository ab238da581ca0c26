package consumers

import (
	"context"
	"testing"
	"time"
)

// TestScaleFollowsLiveInstances runs instances 1 -> 8 -> 3 with short
// leases: in every phase the aggregate follows RATE, where a fixed peer
// count of 8 would give an eighth of it with one instance and 3/8 with
// three.
func TestScaleFollowsLiveInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	pts, err := Scale(context.Background(), ScalingRun{
		Phases: []int{1, 8, 3}, Allowed: 400, LeaseEvery: 200 * time.Millisecond,
		Settle: time.Second, Window: 3 * time.Second, Sink: NullSink{},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		// Loose: the machine is shared; the benchmark's 60 s windows
		// measure the accuracy.
		if p.ErrorPct < -15 || p.ErrorPct > 15 {
			t.Errorf("phase %d with %d instances: %.1f msg/s for %v allowed (%.1f %%); want within 15 %%", p.Phase, p.Consumers, p.Achieved, p.Allowed, p.ErrorPct)
		}
	}
}
