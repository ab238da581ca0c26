// Package metricsources is the controller's list of metric sources: their
// PARAMS rules (All), which `sluice params`, the dashboard and the demo
// decode and check PARAMS with too, and the reader the controller builds
// for each (Readers). Adding a metric source is its adapter package and its
// entry here (docs/architecture.md, "Adding a metric source").
package metricsources

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Config is what the readers are built from.
type Config struct {
	// AWS is the SDK configuration; Endpoint, when set, overrides
	// CloudWatch's endpoint (a local stand-in).
	AWS      aws.Config
	Endpoint string
	// PrometheusURL is the Prometheus server's base URL; without it loops
	// on Prometheus have no reader, and their metric reads fail.
	PrometheusURL string
}

// entry is one metric source: its PARAMS rules and how the controller
// builds its reader (nil when the configuration gives it none).
type entry struct {
	source    metric.Source
	newReader func(Config) (metric.Reader, error)
}

// entries are the sources, the default (the source of PARAMS without
// metric_source) first.
func entries() []entry {
	return []entry{
		{cwmetric.Source{}, func(c Config) (metric.Reader, error) {
			return cwmetric.New(cwmetric.NewClient(c.AWS, c.Endpoint)), nil
		}},
		{prommetric.Source{}, func(c Config) (metric.Reader, error) {
			if c.PrometheusURL == "" {
				return nil, nil
			}
			return prommetric.New(c.PrometheusURL, nil)
		}},
	}
}

// All returns the metric sources, the default first.
func All() metric.Sources {
	var s metric.Sources
	for _, e := range entries() {
		s = append(s, e.source)
	}
	return s
}

// Readers builds the reader of each source the configuration serves, keyed
// by the source's name.
func Readers(cfg Config) (map[string]metric.Reader, error) {
	readers := map[string]metric.Reader{}
	for _, e := range entries() {
		r, err := e.newReader(cfg)
		if err != nil {
			return nil, err
		}
		if r != nil {
			readers[e.source.Name()] = r
		}
	}
	return readers, nil
}
