package protocol_test

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// A consumer reads RATE and shares it among the live instances of its loop.
func Example() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rate := protocol.Rate{Loop: "orders", PerSecond: 300, WrittenAt: now, ExpiresAt: now.Add(3 * time.Minute)}
	peers := []protocol.Peer{
		{Loop: "orders", Instance: "a", ExpiresAt: now.Add(10 * time.Second)},
		{Loop: "orders", Instance: "b", ExpiresAt: now.Add(5 * time.Second)},
		{Loop: "orders", Instance: "c", ExpiresAt: now.Add(-time.Minute)}, // lapsed
	}
	live := protocol.LivePeers(peers, now)
	fmt.Printf("expired: %v\n", rate.Expired(now))
	fmt.Printf("live instances: %d, each at %.0f msg/s\n", live, rate.PerSecond/float64(live))
	fmt.Printf("expired after its TTL: %v\n", rate.Expired(now.Add(3*time.Minute)))
	// Output:
	// expired: false
	// live instances: 2, each at 150 msg/s
	// expired after its TTL: true
}
