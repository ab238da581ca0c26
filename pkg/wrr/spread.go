package wrr

import "math"

// Spread returns the picker weights of nodes (a consumer's configured
// endpoints) from the weights w that the controller wrote to RATE: each node
// gets its weight in w; a node that w does not name, or names with an
// unusable weight, gets the mean of the usable weights of the others (as a
// joining node does in the Controller); when w names none of the nodes (no
// weights yet: a one-node loop, an old or missing RATE item), every node
// gets an equal weight. Names in w that are not among nodes are ignored.
func Spread(nodes []string, w map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(nodes))
	var sum float64
	var known int
	for _, n := range nodes {
		if v, ok := w[n]; ok && v > 0 && !math.IsInf(v, 0) {
			out[n] = v
			sum += v
			known++
		}
	}
	fill := 1.0
	if known > 0 {
		fill = sum / float64(known)
	}
	for _, n := range nodes {
		if _, ok := out[n]; !ok {
			out[n] = fill
		}
	}
	return out
}

// Follow returns a Picker over nodes (at least one) with equal weights, and
// the function that a consumer calls with RATE's weights at every rate read
// (consume.RateCacheConfig.Weights): it sets the picker's weights by Spread.
// Spread's weights are always valid for SetWeights; were they not, the
// picker would keep its weights.
func Follow(nodes []string) (*Picker, func(map[string]float64), error) {
	p, err := NewPicker(Spread(nodes, nil))
	if err != nil {
		return nil, nil, err
	}
	return p, func(w map[string]float64) { _ = p.SetWeights(Spread(nodes, w)) }, nil
}
