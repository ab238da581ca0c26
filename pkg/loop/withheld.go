package loop

import (
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// measureWithheld is the rate the consumers' inner loops withheld since the
// previous tick (dt ago), from the increase of each instance's Withheld
// count over its baseline in prev, and the counts as the next baseline (nil
// when no instance withheld anything). An instance known at the previous
// tick without a withheld baseline had withheld nothing then.
func measureWithheld(peers []protocol.Peer, prev Demand, dt time.Duration, now time.Time) (map[string]int64, float64) {
	var counts map[string]int64
	sum := 0.0
	for _, p := range peers {
		if p.Withheld == 0 || now.Sub(p.ExpiresAt) > protocol.PeerRetention {
			continue
		}
		if counts == nil {
			counts = make(map[string]int64, len(peers))
		}
		counts[p.Instance] = p.Withheld
		base, ok := prev.Withheld[p.Instance]
		if _, known := prev.Stored[p.Instance]; !ok && known {
			base, ok = 0, true
		}
		if ok && p.Withheld >= base {
			sum += float64(p.Withheld - base)
		}
	}
	if dt <= 0 {
		return counts, 0
	}
	return counts, sum / dt.Seconds()
}
