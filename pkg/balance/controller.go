package balance

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Config holds the operator's settings of a Controller. The zero value is not
// usable; start from DefaultConfig.
type Config struct {
	// ProportionalGain is Kp, per unit of relative error.
	ProportionalGain float64 `json:"kp"`
	// IntegralGain is Ki, per unit of relative error per second. The
	// integral step per tick is Ki times the tick in seconds: scale Ki with
	// 1/tick when the tick changes.
	IntegralGain float64 `json:"ki"`
	// MinShare and MaxShare bound a node's weight, as multiples of the equal
	// share 1/N of a fleet of N nodes: MinShare 0.01 keeps every node at 1 %
	// of an equal share or more (never starved); MaxShare 8 keeps it at eight
	// equal shares or less (never flooded). A weight never exceeds 1. The
	// bounds also limit what the balancer can reach: a node of capacity c in
	// a fleet of total capacity C needs c*N/C equal shares.
	MinShare float64 `json:"min_share"`
	MaxShare float64 `json:"max_share"`
	// MinMean is the fleet mean utilization (percent) below which weights
	// are held: an idle fleet's utilization is noise, not imbalance.
	MinMean float64 `json:"min_mean"`
}

// DefaultConfig returns gains tuned on the simulated fleet for a 15-second
// tick and a node lag about as long as the tick: within 20 ticks for fleets
// from 1:2:3 to 1:100, and stable with a metric up to two ticks old (see
// docs/balance.md). With a 60-second tick, divide IntegralGain by 4.
func DefaultConfig() Config {
	return Config{
		ProportionalGain: 0.3,
		IntegralGain:     0.4 / 15, // 0.4 of the relative error per 15 s tick
		MinShare:         0.01,
		MaxShare:         8,
		MinMean:          1,
	}
}

// Validate reports whether c can drive a Controller, with a reason a person
// can act on.
func (c Config) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !finite(c.ProportionalGain) || c.ProportionalGain < 0:
		return fmt.Errorf("balance kp %v: must be a finite number >= 0", c.ProportionalGain)
	case !finite(c.IntegralGain) || c.IntegralGain <= 0:
		return fmt.Errorf("balance ki %v: must be a finite number > 0", c.IntegralGain)
	case !finite(c.MinShare) || c.MinShare <= 0 || c.MinShare > 1:
		return fmt.Errorf("balance min_share %v: must be in (0, 1] (a multiple of the equal share)", c.MinShare)
	case !finite(c.MaxShare) || c.MaxShare < 1:
		return fmt.Errorf("balance max_share %v: must be a finite number >= 1 (a multiple of the equal share)", c.MaxShare)
	case !finite(c.MinMean) || c.MinMean < 0:
		return fmt.Errorf("balance min_mean %v: must be a finite number >= 0", c.MinMean)
	}
	return nil
}

// NodeState is the saved state of one node's controller.
type NodeState struct {
	// Weight is the node's share of the traffic, in (0, 1].
	Weight float64 `json:"w"`
	// Error is the relative error at the node's last tick with a metric.
	Error float64 `json:"e"`
	// Primed reports whether Error is valid. It is false for a node that
	// just joined or whose metric was missing at the last tick, so that the
	// proportional term does not kick when the metric comes back.
	Primed bool `json:"p,omitempty"`
	// Missing counts consecutive ticks without a usable metric.
	Missing int `json:"missing,omitempty"`
}

// State is the saved state of a Controller: plain data that round-trips
// through JSON exactly (it never holds NaN or Inf).
type State struct {
	// Nodes holds each member node's state by node name.
	Nodes map[string]NodeState `json:"nodes"`
	// Mean is the fleet mean utilization at the last tick with metrics.
	Mean float64 `json:"mean"`
	// Ticks counts updates.
	Ticks int64 `json:"ticks"`
}

// Controller moves node weights so that each node's utilization approaches
// the fleet mean. It is one PI controller per node, in velocity form on the
// logarithm of the node's weight:
//
//	e_i(k)     = clamp((m(k) - y_i(k)) / m(k), -1, 1)      m = mean of the y_i
//	ln w_i(k+1) = ln w_i(k) + Kp (e_i(k) - e_i(k-1)) + Ki dt e_i(k)
//
// followed by normalization (the weights sum to 1) and the share bounds.
//
// Why the logarithm and the relative error: a node's utilization is
// proportional to its weight (y_i = g_i w_i, g_i = load / capacity_i), so in
// logarithms every node has the same unit gain, ln y_i = ln w_i + ln g_i,
// whatever its capacity. One pair of gains then fits a fleet whose nodes
// differ tenfold in capacity, and the balancer acts only on the differences
// between nodes: scaling the total load (what the rate loop does) leaves
// every e_i unchanged. Equivalently, it is a linear PI whose gain is scheduled
// by w_i / m, the inverse of the node's plant gain at the operating point
// (Astrom & Murray, Feedback Systems, 2nd ed., sections 10.3 on the velocity
// form and 10.4 on integrator windup; gain scheduling in section 9.5).
//
// Velocity form makes the weight itself the integrator, so clamping the
// weight is the anti-windup (a node pinned at a bound leaves it on the first
// tick its error changes sign) and a gain edit changes only future increments
// (bumpless).
type Controller struct {
	Config Config
	State  State
}

// Update runs one tick. utilization maps every member node to its measured
// utilization in percent: a node present in the map is a member, a node
// absent from it has left, a node that is new has joined. A NaN, infinite or
// negative value means the node's metric is missing: the node keeps its
// weight and its controller holds. dt is the time since the last tick.
//
// A joining node starts at the mean weight (an equal share 1/N after
// normalization, the others scaled down in proportion); a leaving node's
// share goes to the others in proportion to their weights. A change of
// membership moves the mean, so the first tick after it has no proportional
// term (no kick), only the integral step.
func (c *Controller) Update(utilization map[string]float64, dt time.Duration) {
	names := make([]string, 0, len(utilization))
	for name := range utilization {
		names = append(names, name)
	}
	sort.Strings(names) // sums in a fixed order: the result is deterministic
	c.State.Ticks++
	c.membership(names)
	if len(names) == 0 {
		return
	}

	mean, control := c.fleetMean(names, utilization)
	if control {
		c.State.Mean = mean
	}
	step := 0.0
	if dt > 0 {
		step = dt.Seconds()
	}
	held := make(map[string]bool, len(names))
	for _, name := range names {
		n := c.State.Nodes[name]
		y := utilization[name]
		switch {
		case !usable(y):
			n.Missing++
			n.Primed = false
			held[name] = true
		case !control:
			n.Missing, n.Primed = 0, false
		default:
			n.Missing = 0
			c.step(&n, mean, y, step)
		}
		c.State.Nodes[name] = n
	}
	c.normalize(names, held)
}

// fleetMean is the mean utilization over the nodes whose metric is usable,
// and whether it can drive the weights: at least two such nodes, a mean of
// at least MinMean (a mean that overflowed, from absurd metrics, cannot).
func (c *Controller) fleetMean(names []string, utilization map[string]float64) (mean float64, control bool) {
	var sum float64
	var valid int
	for _, name := range names {
		if y := utilization[name]; usable(y) {
			sum += y
			valid++
		}
	}
	if valid > 0 {
		mean = sum / float64(valid)
	}
	return mean, valid >= 2 && mean >= c.Config.MinMean && mean > 0 && !math.IsInf(mean, 0)
}

// step moves node n's weight by its PI step on the relative error of its
// utilization y from the fleet mean, over the given seconds.
func (c *Controller) step(n *NodeState, mean, y, seconds float64) {
	e := clamp((mean-y)/mean, -1, 1)
	delta := c.Config.IntegralGain * seconds * e
	if n.Primed {
		delta += c.Config.ProportionalGain * (e - n.Error)
	}
	if !math.IsNaN(delta) {
		// One tick moves a weight by at most a factor e^2 either way.
		n.Weight *= math.Exp(clamp(delta, -2, 2))
	}
	n.Error = e
	n.Primed = true
}

// Weights returns a copy of the node weights (they sum to 1), for the RATE
// item (protocol.Rate.Weights), which the consumers follow with pkg/wrr's Picker.
func (c *Controller) Weights() map[string]float64 {
	w := make(map[string]float64, len(c.State.Nodes))
	for name, n := range c.State.Nodes {
		w[name] = n.Weight
	}
	return w
}

// membership drops nodes that left and adds nodes that joined at the mean
// weight, then rescales every weight so that they sum to 1. When nothing
// changed it touches no weight (a held node keeps its weight to the bit).
func (c *Controller) membership(names []string) {
	if c.State.Nodes == nil {
		c.State.Nodes = make(map[string]NodeState, len(names))
	}
	member := make(map[string]bool, len(names))
	for _, name := range names {
		member[name] = true
	}
	changed := false
	for name := range c.State.Nodes {
		if !member[name] {
			delete(c.State.Nodes, name)
			changed = true
		}
	}
	var sum float64
	var kept int
	for _, name := range names {
		if n, ok := c.State.Nodes[name]; ok && n.Weight > 0 && !math.IsInf(n.Weight, 0) {
			sum += n.Weight
			kept++
		}
	}
	joinWeight := 1.0
	if kept > 0 {
		joinWeight = sum / float64(kept)
	}
	for _, name := range names {
		n, ok := c.State.Nodes[name]
		if !ok || !(n.Weight > 0) || math.IsInf(n.Weight, 0) {
			c.State.Nodes[name] = NodeState{Weight: joinWeight}
			changed = true
		}
	}
	if changed {
		// The mean jumps when the fleet changes: a step of the setpoint,
		// not a change of the nodes. Unprime every node so that the
		// proportional term does not kick on it.
		for name, n := range c.State.Nodes {
			n.Primed = false
			c.State.Nodes[name] = n
		}
		c.normalize(names, nil)
	}
}

// normalize makes the weights sum to 1 within the share bounds. Nodes in held
// keep their weight and the others share what is left; when that is not
// feasible (the held nodes took too much or too little), all nodes are
// normalized together.
func (c *Controller) normalize(names []string, held map[string]bool) {
	if len(names) == 0 {
		return
	}
	lo, hi := c.bounds(len(names))
	var free []string
	total := 1.0
	for _, name := range names {
		if held[name] {
			w := clamp(c.State.Nodes[name].Weight, lo, hi)
			total -= w
			continue
		}
		free = append(free, name)
	}
	nf := float64(len(free))
	if len(free) == 0 || total < nf*lo || total > nf*hi {
		free, total = names, 1
	} else {
		for _, name := range names {
			if held[name] {
				n := c.State.Nodes[name]
				n.Weight = clamp(n.Weight, lo, hi)
				c.State.Nodes[name] = n
			}
		}
	}
	w := make([]float64, len(free))
	for i, name := range free {
		w[i] = c.State.Nodes[name].Weight
	}
	project(w, total, lo, hi)
	for i, name := range free {
		n := c.State.Nodes[name]
		n.Weight = w[i]
		c.State.Nodes[name] = n
	}
}

// bounds returns the absolute weight bounds of a fleet of n nodes.
func (c *Controller) bounds(n int) (lo, hi float64) {
	equal := 1 / float64(n)
	lo = c.Config.MinShare * equal
	hi = math.Min(1, c.Config.MaxShare*equal)
	if !(lo > 0) || lo > equal {
		lo = 0.05 * equal
	}
	if !(hi >= equal) {
		hi = equal
	}
	return lo, hi
}

// project scales w in place so that sum(clamp(s*w_i, lo, hi)) = total, which
// keeps the ratios between unclamped weights. It requires len(w)*lo <= total
// <= len(w)*hi and w_i > 0. The scale s is found by bisection: the sum is
// continuous and nondecreasing in s, and a fixed number of halvings makes the
// result deterministic.
func project(w []float64, total, lo, hi float64) {
	sum := func(s float64) float64 {
		var t float64
		for _, v := range w {
			t += clamp(s*v, lo, hi)
		}
		return t
	}
	minW, maxW := math.Inf(1), 0.0
	for _, v := range w {
		minW = math.Min(minW, v)
		maxW = math.Max(maxW, v)
	}
	// At s = lo/maxW every weight is at or below lo; at s = hi/minW every
	// weight is at or above hi.
	a, b := lo/maxW, hi/minW
	for i := 0; i < 200 && a < b; i++ {
		m := a + (b-a)/2
		if m <= a || m >= b {
			break
		}
		if sum(m) < total {
			a = m
		} else {
			b = m
		}
	}
	s := b
	var t float64
	for i, v := range w {
		w[i] = clamp(s*v, lo, hi)
		t += w[i]
	}
	// Remove the last rounding error from the unclamped weights so that the
	// sum is 1 to within a few ulps.
	if t > 0 && t != total {
		var free float64
		for _, v := range w {
			if v > lo && v < hi {
				free += v
			}
		}
		if free > 0 {
			f := (free + total - t) / free
			for i, v := range w {
				if v > lo && v < hi {
					w[i] = clamp(v*f, lo, hi)
				}
			}
		}
	}
}

// usable reports whether a measured utilization can drive the controller.
func usable(y float64) bool {
	return !math.IsNaN(y) && !math.IsInf(y, 0) && y >= 0
}

func clamp(v, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, v))
}
