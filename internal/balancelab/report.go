package balancelab

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/plot"
)

// ParseCapacities reads the capacities of a fleet: "1:2:3", "1,2,3" or "random". nodes, when not 0,
// must match the list's length; with "random" it is required (and the
// capacities are drawn with seed). Errors name the flags --capacities and
// --nodes that `sluice lab balance` reads them from.
func ParseCapacities(v string, nodes int, seed uint64) ([]float64, error) {
	if nodes < 0 {
		return nil, fmt.Errorf("--nodes %d: must not be negative", nodes)
	}
	if strings.TrimSpace(v) == "random" {
		if nodes < 2 {
			return nil, fmt.Errorf("--capacities random needs --nodes 2 or more")
		}
		return RandomCapacities(nodes, seed), nil
	}
	parts := strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ',' })
	if len(parts) < 2 {
		return nil, fmt.Errorf("--capacities %q: want two or more capacities like 1:2:3, or 'random'", v)
	}
	caps := make([]float64, len(parts))
	for i, p := range parts {
		c, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || !(c > 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("--capacities %q: capacity %q is not a number > 0", v, p)
		}
		caps[i] = c
	}
	if nodes != 0 && nodes != len(caps) {
		return nil, fmt.Errorf("--nodes %d but --capacities %q lists %d nodes", nodes, v, len(caps))
	}
	return caps, nil
}

// FormatCapacities writes caps as ParseCapacities reads them: 1:2:3.
func FormatCapacities(caps []float64) string {
	parts := make([]string, len(caps))
	for i, c := range caps {
		parts[i] = strconv.FormatFloat(c, 'g', -1, 64)
	}
	return strings.Join(parts, ":")
}

// Figure draws max/avg of each strategy, then the PI run's per-node
// utilization and weights.
func Figure(s Scenario, r Result) plot.Figure {
	ticks := make([]float64, s.Ticks+1)
	for i := range ticks {
		ticks[i] = float64(i)
	}
	ref := make([]float64, len(ticks))
	for i := range ref {
		ref[i] = 1.05
	}
	imbalance := plot.Panel{
		Title:  "imbalance",
		YLabel: "max/avg utilization",
		YMin:   0.95,
		YMax:   math.Max(1.2, math.Min(3, 1.05*r.RoundRobin.Series[0])),
		Series: []plot.Series{
			{Name: "round-robin", X: ticks, Y: r.RoundRobin.Series},
			{Name: "least-loaded (herds; clipped)", X: ticks, Y: r.LeastLoaded.Series},
			{Name: "PI weights", X: ticks, Y: r.PID.Series, Width: 2.5},
			{Name: "1.05", X: ticks, Y: ref, Dashed: true, Color: "grey"},
		},
	}
	names := make([]string, 0, len(r.PID.Utilization))
	for name := range r.PID.Utilization {
		names = append(names, name)
	}
	sort.Strings(names)
	util := plot.Panel{Title: "PI weights: utilization of each node", YLabel: "utilization (%)", YMin: 0, YMax: 100}
	weights := plot.Panel{Title: "PI weights: share of each node", YLabel: "weight"}
	for i, name := range names {
		label := fmt.Sprintf("%s (capacity %g)", name, s.Capacities[i])
		util.Series = append(util.Series, plot.Series{Name: label, X: ticks, Y: r.PID.Utilization[name]})
		weights.Series = append(weights.Series, plot.Series{Name: label, X: ticks, Y: r.PID.Shares[name]})
	}
	return plot.Figure{
		Title:  fmt.Sprintf("Balancing a fleet of capacities %s at %.0f %% load", FormatCapacities(s.Capacities), 100*s.Load),
		XLabel: fmt.Sprintf("controller tick (%v)", s.Tick),
		Panels: []plot.Panel{imbalance, util, weights},
	}
}

// CascadeRow is one variant's result in `sluice lab balance --cascade`.
type CascadeRow struct {
	Name string `json:"name"`
	CascadeResult
}

// RunCascades runs every variant of CascadeVariants and returns their
// results in order, with the figure that draws the hottest node and the
// allowed rate of each (the balancer as fast as the rate loop left out).
func RunCascades() ([]CascadeRow, plot.Figure, error) {
	var rows []CascadeRow
	hot := plot.Panel{Title: "hottest node", YLabel: "utilization (%)", YMin: 40, YMax: 100}
	rates := plot.Panel{Title: "allowed rate", YLabel: "messages/s"}
	for _, v := range CascadeVariants() {
		r, err := RunCascade(v.Scenario)
		if err != nil {
			return nil, plot.Figure{}, fmt.Errorf("%s: %w", v.Name, err)
		}
		rows = append(rows, CascadeRow{Name: v.Name, CascadeResult: r})
		minutes := make([]float64, len(r.Time))
		for i, t := range r.Time {
			minutes[i] = t / 60
		}
		if v.Scenario.BalanceTick != 60*time.Second {
			hot.Series = append(hot.Series, plot.Series{Name: v.Name, X: minutes, Y: r.Max, Dashed: v.Scenario.Regulated == RegulateMean})
			rates.Series = append(rates.Series, plot.Series{Name: v.Name, X: minutes, Y: r.Rate, Dashed: v.Scenario.Regulated == RegulateMean})
		}
	}
	s := DefaultCascade(RegulateMax)
	fig := plot.Figure{
		Title: fmt.Sprintf("Rate loop (tick %v, setpoint %.0f %%) and balancer on a fleet %s; +%.0f points on node-01 at %v",
			s.RateTick, s.Setpoint, FormatCapacities(s.Capacities), s.DisturbanceSize, s.DisturbanceAt),
		XLabel: "time (min)",
		Panels: []plot.Panel{hot, rates},
	}
	return rows, fig, nil
}
