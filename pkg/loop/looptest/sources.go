package looptest

import (
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Sources returns the metric sources the controller runs with, CloudWatch
// first (the default) and Prometheus: for tests that decode, encode or tick
// PARAMS items as the controller does.
func Sources() metric.Sources {
	return metric.Sources{cwmetric.Source{}, prommetric.Source{}}
}
