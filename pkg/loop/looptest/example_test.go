package looptest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

// A loop ticked against fixed metrics: the primary's CPU is below the
// setpoint, so the rate rises; a query for an instance Metrics does not know
// finds no datapoint.
func ExampleMetrics() {
	ctx := context.Background()
	store := memstore.New()
	_ = store.WriteParams(ctx, "orders", map[string]any{
		"setpoint": 70.0, "kp": 1.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "orders-db"},
	})
	metrics := looptest.Metrics{Instances: map[string]float64{"orders-db": 50}, Delay: 90 * time.Second}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	t := &loop.Ticker{
		Store:   store,
		Metrics: map[loop.Source]loop.MetricReader{loop.SourceCloudWatch: metrics},
		Now:     func() time.Time { return now },
	}
	reports, _ := t.Tick(ctx)
	fmt.Printf("%s: CPU %.0f %%, rate %.1f msg/s\n", reports[0].Outcome, reports[0].Measured, reports[0].Rate)
	other, _ := metrics.ReadMetrics(ctx, []loop.MetricQuery{{Dimensions: map[string]string{"DBInstanceIdentifier": "billing-db"}}}, now)
	fmt.Println("billing-db found:", other[0].Found)
	// Output:
	// applied: CPU 50 %, rate 80.0 msg/s
	// billing-db found: false
}
