package balancelab

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Node describes one simulated node of a destination.
type Node struct {
	// Name identifies the node.
	Name string `json:"name"`
	// Capacity is the work the node does per second at 100 % utilization,
	// in the same unit as the fleet's load.
	Capacity float64 `json:"capacity"`
	// Base is the utilization (percent) the node carries with no traffic.
	Base float64 `json:"base"`
}

// Fleet is a simulated destination of several nodes: the plant of the
// balancer. Node i offered the share s_i of a total load L (work per second)
// settles at
//
//	y_i = min(100, Base_i + 100 * s_i * L / Capacity_i)
//
// through a first-order lag: utilization saturates at 100 % (the excess
// queues up), unlike the seed's sketch where it grew without bound.
type Fleet struct {
	lag   time.Duration
	nodes map[string]Node
	util  map[string]float64
}

// NewFleet returns a fleet of nodes with the given lag (the time constant of
// a node's utilization; 0 means it follows its load at once). Every node
// starts at its base utilization.
func NewFleet(nodes []Node, lag time.Duration) (*Fleet, error) {
	if lag < 0 {
		return nil, fmt.Errorf("fleet lag %v: must not be negative", lag)
	}
	f := &Fleet{lag: lag, nodes: map[string]Node{}, util: map[string]float64{}}
	for _, n := range nodes {
		if err := f.Add(n); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Add adds a node at its base utilization.
func (f *Fleet) Add(n Node) error {
	switch {
	case n.Name == "":
		return fmt.Errorf("fleet node: empty name")
	case !(n.Capacity > 0) || math.IsInf(n.Capacity, 0):
		return fmt.Errorf("fleet node %s capacity %v: must be a finite number > 0", n.Name, n.Capacity)
	case !(n.Base >= 0) || n.Base >= 100:
		return fmt.Errorf("fleet node %s base %v: must be in [0, 100)", n.Name, n.Base)
	}
	if _, ok := f.nodes[n.Name]; ok {
		return fmt.Errorf("fleet node %s: already a member", n.Name)
	}
	f.nodes[n.Name] = n
	f.util[n.Name] = n.Base
	return nil
}

// Remove removes a node.
func (f *Fleet) Remove(name string) { delete(f.nodes, name); delete(f.util, name) }

// Names returns the node names in sorted order.
func (f *Fleet) Names() []string {
	return slices.Sorted(maps.Keys(f.nodes))
}

// Capacity returns the fleet's total capacity.
func (f *Fleet) Capacity() float64 {
	var c float64
	for _, name := range f.Names() {
		c += f.nodes[name].Capacity
	}
	return c
}

// Target returns the utilization node name settles at when offered share of
// load.
func (f *Fleet) Target(name string, share, load float64) float64 {
	n := f.nodes[name]
	return math.Min(100, n.Base+100*math.Max(0, share)*math.Max(0, load)/n.Capacity)
}

// Settle puts every node at its steady state for the given shares.
func (f *Fleet) Settle(shares map[string]float64, load float64) {
	for _, name := range f.Names() {
		f.util[name] = f.Target(name, shares[name], load)
	}
}

// Step advances the fleet by dt with the given traffic shares (missing nodes
// get none) and total load, and returns each node's utilization after it.
func (f *Fleet) Step(shares map[string]float64, load float64, dt time.Duration) map[string]float64 {
	a := 1.0
	if f.lag > 0 {
		a = 1 - math.Exp(-dt.Seconds()/f.lag.Seconds())
	}
	for _, name := range f.Names() {
		y := f.util[name]
		f.util[name] = y + a*(f.Target(name, shares[name], load)-y)
	}
	return f.Utilization()
}

// Utilization returns a copy of every node's current utilization.
func (f *Fleet) Utilization() map[string]float64 {
	u := make(map[string]float64, len(f.util))
	for name, y := range f.util {
		u[name] = y
	}
	return u
}

// MaxAvg returns max/mean of the utilizations, the imbalance Robinhood
// reports (1 is perfect balance); 0 for an empty or idle fleet.
func MaxAvg(utilization map[string]float64) float64 {
	var sum, max float64
	for _, name := range slices.Sorted(maps.Keys(utilization)) {
		y := utilization[name]
		sum += y
		max = math.Max(max, y)
	}
	if len(utilization) == 0 || sum <= 0 {
		return 0
	}
	return max / (sum / float64(len(utilization)))
}
