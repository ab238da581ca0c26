package loop

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Regulate says which utilization of a balanced fleet the rate loop holds at
// its setpoint (see docs/balance.md, "The cascade with the rate loop").
type Regulate string

// What the rate loop of a loop with nodes regulates.
const (
	// RegulateMax holds the hottest node (the maximum over nodes with a
	// fresh metric) at the setpoint: what overloads is a node. The default.
	RegulateMax Regulate = "max"
	// RegulateMean holds the fleet mean at the setpoint.
	RegulateMean Regulate = "mean"
)

// MaxNodes bounds the nodes of one loop: each is one metric query per tick.
const MaxNodes = 100

// Node is one destination node of a balanced loop: the balancer gives it a
// weight, keyed in RATE by its endpoint.
type Node struct {
	// Name names the node in PARAMS and in the balancer's state.
	Name string `json:"name"`
	// Endpoint is the URL the consumers' HTTP sink posts to; RATE's weights
	// are keyed by it.
	Endpoint string `json:"endpoint"`
	// Metric selects the node's utilization, as the loop's metric source
	// reads it (metric.Source.Node): for a CloudWatch loop, the node's
	// dimensions as `Name=value[,Name2=value2]` (merged over the loop's
	// metric_dimensions) or a bare value for the loop's single dimension;
	// for a Prometheus loop, a PromQL expression.
	Metric string `json:"metric"`
}

// Attribute names of a balanced loop's PARAMS.
const (
	attrNodes           = "nodes"
	attrRegulate        = "regulate"
	attrBalanceKp       = "balance_kp"
	attrBalanceKi       = "balance_ki"
	attrBalanceMinShare = "balance_min_share"
	attrBalanceMaxShare = "balance_max_share"
	attrBalanceMinMean  = "balance_min_mean"
)

// balanceTick is the tick that balance.DefaultConfig's integral gain is
// tuned for.
const balanceTick = 15 * time.Second

// DefaultBalanceConfig returns the balancer's defaults for a loop ticking
// every tick: balance.DefaultConfig with the integral gain scaled so that
// one tick takes the same integral step as one 15-second tick does with the
// package's defaults (0.4 of the relative error per tick).
func DefaultBalanceConfig(tick time.Duration) balance.Config {
	c := balance.DefaultConfig()
	if tick > 0 {
		c.IntegralGain = c.IntegralGain * balanceTick.Seconds() / tick.Seconds()
	}
	return c
}

// BalanceConfig returns the balancer configuration in force: the edited
// one, or the defaults for the loop's tick period.
func (p Params) BalanceConfig() balance.Config {
	if p.Balance != nil {
		return *p.Balance
	}
	return DefaultBalanceConfig(p.TickPeriod)
}

// Regulation returns what the rate loop regulates: RegulateMax unless the
// loop says mean.
func (p Params) Regulation() Regulate {
	if p.Regulate == RegulateMean {
		return RegulateMean
	}
	return RegulateMax
}

// decodeNodes reads the nodes attribute: a map (M) of node name to a map
// with endpoint (S) and metric (S).
func (d *decoder) decodeNodes() []Node {
	m, ok := attr[map[string]any](d, attrNodes, "a map (M) of node name to {endpoint, metric}")
	if !ok {
		return nil
	}
	if len(m) > MaxNodes {
		d.fail(attrNodes, "%d nodes; at most %d", len(m), MaxNodes)
		return nil
	}
	nodes := make([]Node, 0, len(m))
	for _, name := range sortedKeys(m) {
		field := attrNodes + "." + name
		if strings.TrimSpace(name) == "" {
			d.fail(attrNodes+"."+fmt.Sprintf("%q", name), "a node name must not be blank")
			continue
		}
		nm, ok := m[name].(map[string]any)
		if !ok {
			d.fail(field, "want a map (M) with endpoint (S) and metric (S), got %s", describe(m[name]))
			continue
		}
		n := Node{Name: name}
		good := true
		for _, k := range sortedKeys(nm) {
			s, ok := nm[k].(string)
			switch {
			case k != "endpoint" && k != "metric":
				d.fail(field+"."+k, "unknown attribute; a node has endpoint and metric")
				good = false
			case !ok:
				d.fail(field+"."+k, "want a string (S), got %s", describe(nm[k]))
				good = false
			case k == "endpoint":
				n.Endpoint = s
			default:
				n.Metric = s
			}
		}
		for _, k := range []string{"endpoint", "metric"} {
			if _, ok := nm[k]; !ok {
				d.fail(field+"."+k, "missing")
				good = false
			}
		}
		if good {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// checkNodes validates the nodes, the balancer and regulate.
func (p Params) checkNodes(sources metric.Sources, fail func(field, format string, args ...any)) {
	switch p.Regulate {
	case "", RegulateMax, RegulateMean:
	default:
		fail(attrRegulate, "unknown %q; want max (the hottest node) or mean", truncate(string(p.Regulate)))
	}
	if c := p.Balance; c != nil {
		for _, f := range []struct {
			name string
			v    float64
			ok   bool
			want string
		}{
			{attrBalanceKp, c.ProportionalGain, c.ProportionalGain >= 0, ">= 0"},
			{attrBalanceKi, c.IntegralGain, c.IntegralGain > 0, "> 0 (per second)"},
			{attrBalanceMinShare, c.MinShare, c.MinShare > 0 && c.MinShare <= 1, "in (0, 1], a multiple of the equal share 1/N"},
			{attrBalanceMaxShare, c.MaxShare, c.MaxShare >= 1, ">= 1, a multiple of the equal share 1/N"},
			{attrBalanceMinMean, c.MinMean, c.MinMean >= 0 && c.MinMean <= 100, "in [0, 100] percent"},
		} {
			if !finite(f.v) || !f.ok {
				fail(f.name, "%v must be a finite number %s", f.v, f.want)
			}
		}
	}
	if len(p.Nodes) > MaxNodes {
		fail(attrNodes, "%d nodes; at most %d", len(p.Nodes), MaxNodes)
	}
	endpoints := make(map[string]string, len(p.Nodes))
	names := make(map[string]bool, len(p.Nodes))
	for _, n := range p.Nodes {
		field := attrNodes + "." + n.Name
		if strings.TrimSpace(n.Name) == "" {
			fail(attrNodes, "a node name must not be blank")
			continue
		}
		if names[n.Name] {
			fail(field, "node named twice")
		}
		names[n.Name] = true
		u, err := url.Parse(n.Endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			fail(field+".endpoint", "%q is not an http(s) URL such as http://10.0.0.1:8080/ingest", truncate(n.Endpoint))
		case endpoints[n.Endpoint] != "":
			fail(field+".endpoint", "%q is also the endpoint of node %s: weights are keyed by endpoint", truncate(n.Endpoint), endpoints[n.Endpoint])
		default:
			endpoints[n.Endpoint] = n.Name
		}
		p.checkNodeMetric(sources, n, fail)
	}
}
