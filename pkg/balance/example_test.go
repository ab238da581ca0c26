package balance_test

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
)

// A fleet of three nodes whose capacities are 1:2:3, balanced from plain
// round-robin. The weights end proportional to capacity.
func ExampleController() {
	fleet, _ := balance.NewFleet([]balance.Node{
		{Name: "db-1", Capacity: 1},
		{Name: "db-2", Capacity: 2},
		{Name: "db-3", Capacity: 3},
	}, 15*time.Second)
	c := balance.Controller{Config: balance.DefaultConfig()}
	for tick := 0; tick < 40; tick++ {
		c.Update(fleet.Utilization(), 15*time.Second)
		fleet.Step(c.Weights(), 0.5*fleet.Capacity(), 15*time.Second)
	}
	w := c.Weights()
	fmt.Printf("weights %.3f %.3f %.3f, max/avg %.3f\n", w["db-1"], w["db-2"], w["db-3"], balance.MaxAvg(fleet.Utilization()))
	// Output: weights 0.167 0.333 0.500, max/avg 1.000
}

// The picker interleaves nodes by weight.
func ExamplePicker() {
	p, _ := balance.NewPicker(map[string]float64{"a": 5, "b": 1, "c": 1})
	for i := 0; i < 7; i++ {
		fmt.Print(p.Pick(), " ")
	}
	fmt.Println()
	// Output: a a b a c a a
}
