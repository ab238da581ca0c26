package fairshare_test

import (
	"fmt"
	"math"

	"github.com/sluice-dev/sluice/pkg/fairshare"
)

// Three queues share 600 messages/s by weights 3:2:1; the second is idle, so
// its share goes to the others by their weights.
func ExampleSplit() {
	busy := math.Inf(1)
	shares := fairshare.Split(600, []fairshare.Claim{
		{Weight: 3, Demand: busy},
		{Weight: 2, Demand: 0},
		{Weight: 1, Demand: busy},
	})
	fmt.Printf("%.0f\n", shares)
	// Output: [450 0 150]
}
