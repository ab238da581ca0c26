package balance_test

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
)

// A fleet of three nodes whose capacities are 1:2:3, balanced from equal
// weights. Each tick, every node reports its CPU (here a node's CPU is its
// base load plus its share of the traffic over its capacity); the weights end
// proportional to capacity, and the nodes run at the same CPU.
func ExampleController() {
	capacity := map[string]float64{"db-1": 1, "db-2": 2, "db-3": 3}
	cpu := func(w map[string]float64) map[string]float64 {
		u := make(map[string]float64)
		for n, c := range capacity {
			u[n] = 10 + 150*w[n]/c
		}
		return u
	}
	c := balance.Controller{Config: balance.DefaultConfig()}
	w := map[string]float64{"db-1": 1.0 / 3, "db-2": 1.0 / 3, "db-3": 1.0 / 3}
	for tick := 0; tick < 60; tick++ {
		c.Update(cpu(w), 15*time.Second)
		w = c.Weights()
	}
	u := cpu(w)
	fmt.Printf("weights %.3f %.3f %.3f\n", w["db-1"], w["db-2"], w["db-3"])
	fmt.Printf("cpu %.1f %.1f %.1f\n", u["db-1"], u["db-2"], u["db-3"])
	// Output:
	// weights 0.167 0.333 0.500
	// cpu 35.0 35.0 35.0
}
