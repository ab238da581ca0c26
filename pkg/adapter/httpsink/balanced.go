package httpsink

import (
	"fmt"

	"github.com/sluice-dev/sluice/pkg/wrr"
)

// Balanced returns the endpoint picker of a consumer's HTTP sink:
// round-robin over one endpoint; over several, smooth weighted round-robin
// (pkg/wrr) whose weights follow the balancer's weights in RATE (keyed by
// endpoint URL; equal when none). The function returned, nil for one
// endpoint, is what the consumer calls with RATE's weights at every rate read
// (consume.RateCacheConfig.Weights), never per message.
func Balanced(endpoints []string) (Picker, func(map[string]float64), error) {
	if len(endpoints) < 2 {
		return NewRoundRobin(endpoints...), nil, nil
	}
	p, follow, err := wrr.Follow(endpoints)
	if err != nil {
		return nil, nil, fmt.Errorf("HTTP endpoints: %w", err)
	}
	return p, follow, nil
}
