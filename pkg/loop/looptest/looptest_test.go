package looptest_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/metric/metrictest"
)

// TestMetricsContract runs the Reader contract on the fixed-value reader:
// the instance it knows is present, another missing.
func TestMetricsContract(t *testing.T) {
	r := looptest.Metrics{Instances: map[string]float64{"db-1": 42}, Delay: 30 * time.Second}
	metrictest.Run(t, r, metrictest.Fixture{
		Present: metric.Query{Source: "cloudwatch", Dimensions: map[string]string{"DBInstanceIdentifier": "db-1"}, Period: time.Minute},
		Value:   42,
		Missing: metric.Query{Source: "cloudwatch", Dimensions: map[string]string{"DBInstanceIdentifier": "db-2"}, Period: time.Minute},
	})
}
