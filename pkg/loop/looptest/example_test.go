package looptest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Metrics per instance: a query for an instance it does not know finds no
// datapoint. pkg/loop's ExampleTicker ticks a loop against Metrics.
func ExampleMetrics() {
	metrics := looptest.Metrics{Instances: map[string]float64{"orders-db": 50}, Delay: 90 * time.Second}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	query := func(instance string) metric.Query {
		return metric.Query{Period: time.Minute, Dimensions: map[string]string{"DBInstanceIdentifier": instance}}
	}
	samples, _ := metrics.ReadMetrics(context.Background(), []metric.Query{query("orders-db"), query("billing-db")}, now)
	for _, s := range samples {
		fmt.Printf("found %v, value %.0f, period from %s\n", s.Found, s.Value, s.Time.Format("15:04:05"))
	}
	// Output:
	// found true, value 50, period from 11:57:30
	// found false, value 0, period from 00:00:00
}
