package wrr

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// resolution is the number of integer weight units that a weight of 1 is
// worth in the Picker: shares are kept to 1e-6.
const resolution = 1_000_000

// Picker chooses the node for each request by nginx's smooth weighted
// round-robin (ngx_http_upstream_get_peer): at every pick each node's current
// weight grows by its weight, the node with the largest current weight wins,
// and the winner's current weight drops by the sum of the weights. Over any
// window the picks follow the weights as closely as integers allow, and they
// are interleaved, not bunched: weights 5:1:1 give a a b a c a a, not
// a a a a a b c.
//
// Weights are converted to integers (resolution 1e-6 of the total), so the
// sequence is exact and deterministic: ties go to the node that sorts first.
// A pick costs O(nodes). A Picker is safe for concurrent use, and SetWeights
// may be called at any time.
type Picker struct {
	mu    sync.Mutex
	nodes []pickNode
	total int64
}

type pickNode struct {
	name    string
	weight  int64
	current int64
}

// NewPicker returns a Picker over the given weights (see SetWeights).
func NewPicker(weights map[string]float64) (*Picker, error) {
	p := &Picker{}
	if err := p.SetWeights(weights); err != nil {
		return nil, err
	}
	return p, nil
}

// SetWeights replaces the weights. Weights are relative (they need not sum to
// 1); a node with weight 0 gets no traffic, and at least one weight must be
// positive. Nodes that stay keep their place in the sequence when only the
// weights change; when nodes join or leave, the sequence restarts.
func (p *Picker) SetWeights(weights map[string]float64) error {
	names := make([]string, 0, len(weights))
	var sum float64
	for name, w := range weights {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return fmt.Errorf("picker weight of node %q is %v: must be a finite number >= 0", name, w)
		}
		names = append(names, name)
		sum += w
	}
	if !(sum > 0) {
		return fmt.Errorf("picker: %d nodes and no positive weight: nothing to pick", len(weights))
	}
	sort.Strings(names)
	nodes := make([]pickNode, len(names))
	var total int64
	for i, name := range names {
		w := int64(math.Round(weights[name] / sum * resolution))
		if w == 0 && weights[name] > 0 {
			w = 1 // a positive weight is never rounded to starvation
		}
		nodes[i] = pickNode{name: name, weight: w}
		total += w
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	same := len(nodes) == len(p.nodes)
	for i := 0; same && i < len(nodes); i++ {
		same = nodes[i].name == p.nodes[i].name
	}
	if same {
		for i := range nodes {
			nodes[i].current = p.nodes[i].current
		}
	}
	p.nodes, p.total = nodes, total
	return nil
}

// Pick returns the next node.
func (p *Picker) Pick() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i := range p.nodes {
		n := &p.nodes[i]
		n.current += n.weight
		if n.weight > 0 && (best < 0 || n.current > p.nodes[best].current) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	p.nodes[best].current -= p.total
	return p.nodes[best].name
}

// Weights returns the picker's weights as shares that sum to 1.
func (p *Picker) Weights() map[string]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := make(map[string]float64, len(p.nodes))
	for _, n := range p.nodes {
		w[n.name] = float64(n.weight) / float64(p.total)
	}
	return w
}
