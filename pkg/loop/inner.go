package loop

import (
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// innerOf is what the live leases at now say of the consumers' inner loops:
// the mean store latency per message of those that carry one, and the mean
// learned reference of those that carry one (zero: none).
func innerOf(peers []protocol.Peer, now time.Time) (latency, reference time.Duration) {
	var nl, nr time.Duration
	for _, p := range peers {
		if !p.Live(now) {
			continue
		}
		if p.InnerLatency > 0 {
			latency += p.InnerLatency
			nl++
		}
		if p.InnerReference > 0 {
			reference += p.InnerReference
			nr++
		}
	}
	if nl > 0 {
		latency /= nl
	}
	if nr > 0 {
		reference /= nr
	}
	return latency, reference
}
