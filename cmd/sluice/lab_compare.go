package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/plot"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
)

// optionalFloat is a flag whose value is a finite number >= 0 and whose
// absence means "derive it" (a gain: tune it; a step rate: take it from the
// scenario); want says, in an error, what the value must be.
type optionalFloat struct {
	v    float64
	set  bool
	want string
}

func (f *optionalFloat) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.FormatFloat(f.v, 'g', -1, 64)
}

func (f *optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%q: want %s", s, f.want)
	}
	f.v, f.set = v, true
	return nil
}

// ptr is the value, or nil when the flag is absent.
func (f *optionalFloat) ptr() *float64 {
	if !f.set {
		return nil
	}
	v := f.v
	return &v
}

// compareFlags are the flags of `sluice lab compare` on the simulated
// plant.
type compareFlags struct {
	scenario   *scenarioFlags
	list       *string
	kp, ki, kd optionalFloat
	asJSON     *bool
	plotPath   *string
}

// addCompareFlags declares the flags of `sluice lab compare` on fs.
func addCompareFlags(fs *flag.FlagSet) *compareFlags {
	f := &compareFlags{scenario: addScenarioFlags(fs)}
	f.list = fs.String("controllers", strings.Join(lab.Controllers(), ","),
		"comma-separated controllers to compare, of "+strings.Join(append(lab.Controllers(), lab.Override), ",")+
			"\n(default on a scenario with a replica: "+lab.PIAWSPFF+","+lab.Override+")")
	gain := func() optionalFloat { return optionalFloat{want: "a finite gain >= 0"} }
	f.kp, f.ki, f.kd = gain(), gain(), gain()
	fs.Var(&f.kp, "kp", "override the tuned proportional gain, messages/s per point of CPU")
	fs.Var(&f.ki, "ki", "override the tuned integral gain, messages/s per point-second")
	fs.Var(&f.kd, "kd", "override the tuned derivative gain, messages per point")
	f.asJSON = fs.Bool("json", false, `print {"scenario","model","loop_dead_time_s","iae_bound","results":[...]} as JSON`)
	f.plotPath = fs.String("plot", "", "write a plot (setpoint, true and measured CPU, allowed rate per controller) to this .svg or .png file")
	return f
}

// controllers are the controllers --controllers names, or scenario s's
// default when the flag is absent.
func (f *compareFlags) controllers(fs *flag.FlagSet, s sim.Scenario) ([]string, error) {
	names, err := lab.ParseControllers(*f.list)
	if err != nil {
		return nil, fmt.Errorf("--controllers: %w", err)
	}
	if !flagSet(fs, "controllers") {
		names = lab.DefaultControllers(s)
	}
	return names, nil
}

// runLabCompare is `sluice lab compare` (on the simulated plant unless
// --plant says otherwise).
func runLabCompare(args []string, stdout, stderr io.Writer) int {
	if isShared(args) {
		return runSharedCompare(args, stdout, stderr) // several queues into one database (shared.go)
	}
	if code, handled := realPlantDispatch(args, runLabCompareMariaDB, stdout, stderr); handled { // --plant mariadb: lab_mariadb.go
		return code
	}
	const name = "sluice lab compare"
	fs := newFlagSet(name, name+" [scenario flags] [--controllers LIST] [--kp K --ki K --kd K] [--json] [--plot FILE]",
		"Identify the simulated plant by an open-loop step test, tune every feedback controller\n"+
			"from the identified model (SIMC, with the loop dead time = identified dead time +\n"+
			"metric period/2 + publication delay + tick/2), then run each controller in closed loop\n"+
			"on the same scenario and measure it from the plant's true CPU. iae_ratio is the IAE\n"+
			"over iae_bound, the error no controller can avoid (docs/architecture.md).\n"+
			"Controllers: "+strings.Join(lab.Controllers(), ", ")+".\n"+
			"Durations use Go syntax: 90s, 120m.")
	f := addCompareFlags(fs)
	plotPath := f.plotPath
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	s, err := f.scenario.Scenario()
	if err != nil {
		return fail(stderr, name, err, 2)
	}
	names, err := f.controllers(fs, s)
	if err != nil {
		return fail(stderr, name, err, 2)
	}
	if *plotPath != "" {
		if err := plot.CheckPath(*plotPath); err != nil {
			fmt.Fprintf(stderr, "%s: --plot: %v\n", name, err)
			return 2
		}
	}
	rep, err := lab.Compare(s, lab.Options{Controllers: names, Gains: lab.Gains{Kp: f.kp.ptr(), Ki: f.ki.ptr(), Kd: f.kd.ptr()}})
	if err != nil {
		return fail(stderr, name, err, 1)
	}
	if *plotPath != "" {
		if err := lab.CompareFigure(s, rep).WriteFile(*plotPath); err != nil {
			fmt.Fprintf(stderr, "%s: plot: %v\n", name, err)
			return 1
		}
	}
	if *f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return failIf(stderr, name, enc.Encode(rep), 1)
	}
	printCompare(stdout, rep)
	printSignals(stdout, rep)
	printPlantChanges(stdout, rep)
	if *plotPath != "" {
		fmt.Fprintf(stdout, "\nplot: %s\n", *plotPath)
	}
	return 0
}

// printCompare prints the model and each controller's measures as a table.
func printCompare(w io.Writer, rep lab.Report) {
	m := rep.Model
	fmt.Fprintf(w, "identified model: gain %.4g points per msg/s, tau %.1f s, dead time %.1f s, base %.2f %% (rmse %.2f, noise %.2f)\n",
		m.Gain, m.TauS, m.DeadTimeS, m.Base, m.RMSE, m.NoiseSD)
	fmt.Fprintf(w, "loop dead time %.0f s, iae_bound %.0f point-s, iae_floor %.0f point-s\n\n", rep.LoopDeadTimeS, rep.IAEBound, rep.IAEFloor)
	fmt.Fprintf(w, "%-13s %10s %6s %6s %9s %8s %9s %9s %9s %11s %5s %7s\n",
		"controller", "IAE", "ratio", "floor", "overshoot", "viol_s", "settle_st", "settle_di", "settle_sp", "processed", "lost", "max_cpu")
	sec := func(v *float64) string {
		if v == nil {
			return "never"
		}
		return strconv.FormatFloat(*v, 'f', 0, 64)
	}
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%-13s %10.0f %6.2f %6.2f %9.2f %8.0f %9s %9s %9s %11d %5d %7.1f\n",
			r.Controller, r.IAE, r.IAERatio, r.IAEFloorRatio, r.StartOvershootPP, r.ViolationS,
			sec(r.SettlingS.Start), sec(r.SettlingS.Disturbance), sec(r.SettlingS.Setpoint), r.Processed, r.Lost, r.MaxCPU)
	}
}

// printSignals prints each signal's measures when the scenario has more
// than the CPU.
func printSignals(w io.Writer, rep lab.Report) {
	if rep.Scenario.Replica == nil {
		return
	}
	fmt.Fprintf(w, "\n%-13s %-6s %9s %11s %9s %12s %10s %12s %9s\n",
		"controller", "signal", "setpoint", "mean_settled", "max", "iae_limiting", "limiting_s", "above_band_s", "switches")
	for _, r := range rep.Results {
		for _, g := range r.Signals {
			fmt.Fprintf(w, "%-13s %-6s %9.1f %11.2f %9.1f %12.0f %10.0f %12.0f %9d\n",
				r.Controller, g.Name, g.Setpoint, g.MeanAfterSettle, g.Max, g.IAELimiting, g.LimitingS, g.AboveBandS, r.LimitingSwitches)
		}
	}
}

// flagSet reports whether flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
