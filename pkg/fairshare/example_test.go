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

// Two queues share 600 messages/s; the first took 100 and claims 20 % more
// to show its growth, a margin it is not expected to take: the second gets
// what the first does not take, so that the two take the 600 between them.
func ExampleSplit_margin() {
	shares := fairshare.Split(600, []fairshare.Claim{
		{Weight: 1, Demand: 120, Margin: 20},
		{Weight: 1, Demand: math.Inf(1)},
	})
	fmt.Printf("%.0f\n", shares)
	// Output: [120 500]
}
