package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/balancelab"
	"github.com/sluice-dev/sluice/internal/plot"
)

// labBalance is the command name of `sluice lab balance`.
const labBalance = "sluice lab balance"

// printBalanceJSON writes v as the one line of JSON of `lab balance --json`
// and returns the exit code.
func printBalanceJSON(stdout, stderr io.Writer, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return fail(stderr, labBalance, err, 1)
	}
	fmt.Fprintln(stdout, string(b))
	return 0
}

// runLabBalance is `sluice lab balance`: plain round-robin, a greedy
// least-loaded rule and the PI weights on the same simulated fleet.
func runLabBalance(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(labBalance, labBalance+" [--capacities 1:2:3 | --nodes N --capacities random] [fleet and controller flags] [--json] [--plot FILE] | --cascade",
		"Balance a simulated fleet of nodes of different capacity: plain round-robin, a greedy\n"+
			"least-loaded rule and the PI weights on the same load; the max/avg utilization of each\n"+
			"and the ticks until it stays within 1.05. With --cascade: the rate loop and the balancer together.")
	s := balancelab.DefaultScenario(nil)
	nodes := fs.Int("nodes", 0, "number of nodes (0: as many as --capacities lists)")
	capacities := fs.String("capacities", "1:2:3", "node capacities, e.g. 1:2:3 (or 1,2,3), or 'random' for --nodes capacities drawn from [1, 10] with --seed")
	fs.IntVar(&s.Ticks, "ticks", s.Ticks, "controller ticks")
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "seed of the load jitter, the noise and random capacities")
	fs.Float64Var(&s.Load, "load", s.Load, "total load as a fraction of the fleet's capacity")
	fs.Float64Var(&s.Base, "base", s.Base, "every node's utilization with no traffic, percent")
	fs.Float64Var(&s.Jitter, "jitter", s.Jitter, "relative random change of the load per tick")
	fs.Float64Var(&s.Noise, "noise", s.Noise, "measurement noise, standard deviation in points")
	fs.DurationVar(&s.Tick, "tick", s.Tick, "controller tick")
	fs.DurationVar(&s.Lag, "lag", s.Lag, "time constant of a node's utilization")
	fs.IntVar(&s.Delay, "delay", s.Delay, "age of the metric the controller reads, in ticks")
	fs.Float64Var(&s.Config.ProportionalGain, "kp", s.Config.ProportionalGain, "proportional gain")
	fs.Float64Var(&s.Config.IntegralGain, "ki", s.Config.IntegralGain, "integral gain, per second")
	fs.Float64Var(&s.Config.MinShare, "min-share", s.Config.MinShare, "smallest weight, as a multiple of the equal share")
	fs.Float64Var(&s.Config.MaxShare, "max-share", s.Config.MaxShare, "largest weight, as a multiple of the equal share")
	cascade := fs.Bool("cascade", false, "instead: the rate loop and the balancer together (rate on the hottest node or the mean; balancer faster, as fast, slower, off)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	plotFile := fs.String("plot", "", "write a chart to this .svg or .png file")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	if *cascade {
		return runCascade(*asJSON, *plotFile, stdout, stderr)
	}
	caps, err := parseCapacities(*capacities, *nodes, s.Seed)
	if err != nil {
		return fail(stderr, labBalance, err, 2)
	}
	s.Capacities = caps
	if *plotFile != "" {
		if err := plot.CheckPath(*plotFile); err != nil {
			return fail(stderr, labBalance, err, 2)
		}
	}
	if err := s.Validate(); err != nil {
		return fail(stderr, labBalance, err, 2)
	}
	r, err := balancelab.Run(s)
	if err != nil {
		return fail(stderr, labBalance, err, 1)
	}
	if *plotFile != "" {
		if err := balanceFigure(s, r).WriteFile(*plotFile); err != nil {
			return fail(stderr, labBalance, err, 1)
		}
	}
	if *asJSON {
		return printBalanceJSON(stdout, stderr, r)
	}
	fmt.Fprintf(stdout, "fleet %s, load %.0f %% of capacity, %d ticks of %v\n",
		formatCapacities(caps), 100*s.Load, s.Ticks, s.Tick)
	fmt.Fprintf(stdout, "%-14s %8s %14s\n", "strategy", "max/avg", "ticks to 1.05")
	for _, row := range []struct {
		name string
		o    balancelab.Outcome
	}{{"round-robin", r.RoundRobin}, {"least-loaded", r.LeastLoaded}, {"pid", r.PID}} {
		t := "never"
		if row.o.TicksTo105 != nil {
			t = strconv.Itoa(*row.o.TicksTo105)
		}
		fmt.Fprintf(stdout, "%-14s %8.3f %14s\n", row.name, row.o.MaxAvg, t)
	}
	return 0
}

// parseCapacities reads "1:2:3", "1,2,3" or "random". nodes, when not 0,
// must match the list's length; with "random" it is required.
func parseCapacities(v string, nodes int, seed uint64) ([]float64, error) {
	if nodes < 0 {
		return nil, fmt.Errorf("--nodes %d: must not be negative", nodes)
	}
	if strings.TrimSpace(v) == "random" {
		if nodes < 2 {
			return nil, fmt.Errorf("--capacities random needs --nodes 2 or more")
		}
		return balancelab.RandomCapacities(nodes, seed), nil
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

func formatCapacities(caps []float64) string {
	parts := make([]string, len(caps))
	for i, c := range caps {
		parts[i] = strconv.FormatFloat(c, 'g', -1, 64)
	}
	return strings.Join(parts, ":")
}

// balanceFigure draws max/avg of each strategy, then the PI run's per-node
// utilization and weights.
func balanceFigure(s balancelab.Scenario, r balancelab.Result) plot.Figure {
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
		Title:  fmt.Sprintf("Balancing a fleet of capacities %s at %.0f %% load", formatCapacities(s.Capacities), 100*s.Load),
		XLabel: fmt.Sprintf("controller tick (%v)", s.Tick),
		Panels: []plot.Panel{imbalance, util, weights},
	}
}

// runCascade is `sluice lab balance --cascade`.
func runCascade(asJSON bool, plotFile string, stdout, stderr io.Writer) int {
	if plotFile != "" {
		if err := plot.CheckPath(plotFile); err != nil {
			return fail(stderr, labBalance, err, 2)
		}
	}
	type row struct {
		Name string `json:"name"`
		balancelab.CascadeResult
	}
	var rows []row
	var fig plot.Figure
	hot := plot.Panel{Title: "hottest node", YLabel: "utilization (%)", YMin: 40, YMax: 100}
	rates := plot.Panel{Title: "allowed rate", YLabel: "messages/s"}
	for _, v := range balancelab.CascadeVariants() {
		r, err := balancelab.RunCascade(v.Scenario)
		if err != nil {
			return fail(stderr, labBalance+": "+v.Name, err, 1)
		}
		rows = append(rows, row{Name: v.Name, CascadeResult: r})
		minutes := make([]float64, len(r.Time))
		for i, t := range r.Time {
			minutes[i] = t / 60
		}
		if v.Scenario.BalanceTick != 60*time.Second {
			hot.Series = append(hot.Series, plot.Series{Name: v.Name, X: minutes, Y: r.Max, Dashed: v.Scenario.Regulated == balancelab.RegulateMean})
			rates.Series = append(rates.Series, plot.Series{Name: v.Name, X: minutes, Y: r.Rate, Dashed: v.Scenario.Regulated == balancelab.RegulateMean})
		}
	}
	if plotFile != "" {
		s := balancelab.DefaultCascade(balancelab.RegulateMax)
		fig = plot.Figure{
			Title: fmt.Sprintf("Rate loop (tick %v, setpoint %.0f %%) and balancer on a fleet %s; +%.0f points on node-01 at %v",
				s.RateTick, s.Setpoint, formatCapacities(s.Capacities), s.DisturbanceSize, s.DisturbanceAt),
			XLabel: "time (min)",
			Panels: []plot.Panel{hot, rates},
		}
		if err := fig.WriteFile(plotFile); err != nil {
			return fail(stderr, labBalance, err, 1)
		}
	}
	if asJSON {
		return printBalanceJSON(stdout, stderr, map[string]any{"cascade": rows})
	}
	fmt.Fprintf(stdout, "%-32s %10s %9s %9s %9s %8s\n", "variant", "rate msg/s", "peak %", "s > sp+5", "s at 100", "max/avg")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-32s %10.0f %9.1f %9.0f %9.0f %8.3f\n", r.Name, r.Throughput, r.PeakMax, r.SecondsOver, r.SecondsSaturated, r.MaxAvg)
	}
	return 0
}
