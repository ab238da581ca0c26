package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"

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

// balanceFlags are the flags of `sluice lab balance`.
type balanceFlags struct {
	s          balancelab.Scenario
	nodes      *int
	capacities *string
	cascade    *bool
	asJSON     *bool
	plotFile   *string
}

// addBalanceFlags declares the flags of `sluice lab balance` on fs, the
// scenario's defaulting to balancelab.DefaultScenario.
func addBalanceFlags(fs *flag.FlagSet) *balanceFlags {
	f := &balanceFlags{s: balancelab.DefaultScenario(nil)}
	s := &f.s
	f.nodes = fs.Int("nodes", 0, "number of nodes (0: as many as --capacities lists)")
	f.capacities = fs.String("capacities", "1:2:3", "node capacities, e.g. 1:2:3 (or 1,2,3), or 'random' for --nodes capacities drawn from [1, 10] with --seed")
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
	f.cascade = fs.Bool("cascade", false, "instead: the rate loop and the balancer together (rate on the hottest node or the mean; balancer faster, as fast, slower, off)")
	f.asJSON = fs.Bool("json", false, "print one JSON object")
	f.plotFile = fs.String("plot", "", "write a chart to this .svg or .png file")
	return f
}

// runLabBalance is `sluice lab balance`: plain round-robin, a greedy
// least-loaded rule and the PI weights on the same simulated fleet.
func runLabBalance(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(labBalance, labBalance+" [--capacities 1:2:3 | --nodes N --capacities random] [fleet and controller flags] [--json] [--plot FILE] | --cascade",
		"Balance a simulated fleet of nodes of different capacity: plain round-robin, a greedy\n"+
			"least-loaded rule and the PI weights on the same load; the max/avg utilization of each\n"+
			"and the ticks until it stays within 1.05. With --cascade: the rate loop and the balancer together.")
	f := addBalanceFlags(fs)
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	if *f.cascade {
		return runCascade(*f.asJSON, *f.plotFile, stdout, stderr)
	}
	s := f.s
	caps, err := balancelab.ParseCapacities(*f.capacities, *f.nodes, s.Seed)
	if err != nil {
		return fail(stderr, labBalance, err, 2)
	}
	s.Capacities = caps
	if *f.plotFile != "" {
		if err := plot.CheckPath(*f.plotFile); err != nil {
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
	if *f.plotFile != "" {
		if err := balancelab.Figure(s, r).WriteFile(*f.plotFile); err != nil {
			return fail(stderr, labBalance, err, 1)
		}
	}
	if *f.asJSON {
		return printBalanceJSON(stdout, stderr, r)
	}
	printBalance(stdout, s, r)
	return 0
}

// printBalance prints the result r of scenario s as a table.
func printBalance(w io.Writer, s balancelab.Scenario, r balancelab.Result) {
	fmt.Fprintf(w, "fleet %s, load %.0f %% of capacity, %d ticks of %v\n",
		balancelab.FormatCapacities(s.Capacities), 100*s.Load, s.Ticks, s.Tick)
	fmt.Fprintf(w, "%-14s %8s %14s\n", "strategy", "max/avg", "ticks to 1.05")
	for _, row := range []struct {
		name string
		o    balancelab.Outcome
	}{{"round-robin", r.RoundRobin}, {"least-loaded", r.LeastLoaded}, {"pid", r.PID}} {
		t := "never"
		if row.o.TicksTo105 != nil {
			t = strconv.Itoa(*row.o.TicksTo105)
		}
		fmt.Fprintf(w, "%-14s %8.3f %14s\n", row.name, row.o.MaxAvg, t)
	}
}

// runCascade is `sluice lab balance --cascade`.
func runCascade(asJSON bool, plotFile string, stdout, stderr io.Writer) int {
	if plotFile != "" {
		if err := plot.CheckPath(plotFile); err != nil {
			return fail(stderr, labBalance, err, 2)
		}
	}
	rows, fig, err := balancelab.RunCascades()
	if err != nil {
		return fail(stderr, labBalance, err, 1)
	}
	if plotFile != "" {
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
