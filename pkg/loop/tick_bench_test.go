package loop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// BenchmarkTick measures one controller tick over n loops against the
// in-memory store: the handler's own cost, without network.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("loops=%d", n), func(b *testing.B) {
			store := memstore.New()
			metrics := &fakeMetrics{samples: map[string]metric.Sample{}}
			clock := &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
			for i := range n {
				id := fmt.Sprintf("loop-%04d", i)
				a := valid(func(a map[string]any) {
					a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": id}
					a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"] = 0.05, 10.0, "15s", "5s"
					a["setpoint_filter"] = "2m"
				})
				if err := store.WriteParams(context.Background(), id, a); err != nil {
					b.Fatal(err)
				}
				metrics.setLive(id, liveMetric{value: 40 + float64(i%50), age: 90 * time.Second})
			}
			tk := &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{cwmetric.Name: metrics}, Now: clock.Now}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				clock.now = clock.now.Add(time.Minute)
				reps, err := tk.Tick(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if reps[0].Outcome != loop.OutcomeApplied {
					b.Fatalf("tick = %+v", reps[0])
				}
				metrics.calls = metrics.calls[:0]
			}
		})
	}
}
