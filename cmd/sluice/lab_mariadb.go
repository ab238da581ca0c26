package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/plot"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
)

// realPlantFlags are the flags of the real-plant experiments: where the
// database is, how its CPU is measured, what each message costs.
type realPlantFlags struct {
	c       dbload.Config
	verbose bool
}

func addRealPlantFlags(fs *flag.FlagSet) *realPlantFlags {
	f := &realPlantFlags{}
	fs.StringVar(&f.c.DSN, "dsn", os.Getenv("SLUICE_MYSQL_DSN"), "MariaDB DSN (go-sql-driver format; default $SLUICE_MYSQL_DSN); its user must be able to create --database")
	fs.StringVar(&f.c.Database, "database", "sluice_lab", "database the experiment creates and uses (messages table, workload trigger)")
	fs.StringVar(&f.c.Process, "process", "mariadbd", "command name of the database server process whose CPU is measured")
	fs.IntVar(&f.c.PID, "pid", 0, "pid of the database server process (default: find --process)")
	fs.Float64Var(&f.c.Cores, "cores", 0, "cores that 100 % CPU means (default: the process's CPU affinity and cgroup quota)")
	fs.IntVar(&f.c.ScanRows, "scan-rows", dbload.DefaultScanRows, "rows each message's aggregate reads: the per-message CPU cost")
	fs.IntVar(&f.c.DataRows, "data-rows", dbload.DefaultDataRows, "rows of the workload's data table")
	fs.IntVar(&f.c.Workers, "workers", 4, "concurrent consumers (connections) storing messages")
	fs.IntVar(&f.c.Batch, "batch", 1, "messages per insert (1: a smooth load; 10: SQS batches)")
	fs.DurationVar(&f.c.Sample, "sample", time.Second, "sampling period of the database's CPU")
	fs.BoolVar(&f.verbose, "v", false, "print every sample to stderr")
	fs.String("plant", "mariadb", "the plant (mariadb here)")
	return f
}

// start checks --plot (plotPath) and opens the real plant under a context
// that an interrupt ends. When it cannot, it tells why on stderr and
// returns no plant and the exit code: 2 for a bad --plot, 1 when the plant
// does not open. stop releases what it opened.
func (f *realPlantFlags) start(name, plotPath string, stderr io.Writer) (ctx context.Context, rp *dbload.RealPlant, stop func(), code int) {
	if badPlotPath(name, plotPath, stderr) {
		return context.Background(), nil, func() {}, 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	c := f.c
	if f.verbose {
		c.Progress = func(t time.Duration, cpu, allowed, processed float64) {
			fmt.Fprintf(stderr, "t=%5.0fs cpu=%5.1f%% allowed=%6.1f processed=%6.1f\n", t.Seconds(), cpu, allowed, processed)
		}
	}
	rp, err := dbload.Open(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ctx, nil, cancel, 1
	}
	return ctx, rp, func() { rp.Close(); cancel() }, 0
}

// runLabStepMariaDB is `sluice lab step --plant mariadb`.
func runLabStepMariaDB(args []string, stdout, stderr io.Writer) int {
	const name = "sluice lab step --plant mariadb"
	fs := newFlagSet(name, name+" [--step-from RATE --step-to RATE --step-at DUR --duration DUR] [--json] [--plot FILE] [--csv FILE]",
		"Open-loop step test on the real database: consumers store messages in MariaDB's\n"+
			"messages table (each insert runs the workload trigger of internal/dbload) at --step-from\n"+
			"messages/s, then at --step-to from --step-at; the database server's CPU is read from\n"+
			"/proc every --sample and a first-order-plus-dead-time model is fitted to it against\n"+
			"the rate the database actually took. Needs MariaDB (make up).")
	rf := addRealPlantFlags(fs)
	from := fs.Float64("step-from", 10, "rate before the step, messages/s")
	to := fs.Float64("step-to", 40, "rate after the step, messages/s")
	at := fs.Duration("step-at", 30*time.Second, "time of the step")
	duration := fs.Duration("duration", 100*time.Second, "length of the test")
	asJSON := fs.Bool("json", false, "print the model as JSON")
	plotPath := fs.String("plot", "", "write a plot of the test and the fit (.svg or .png)")
	csvPath := fs.String("csv", "", "also write the step test to this CSV file (t_s,input,output)")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	ctx, rp, stop, code := rf.start(name, *plotPath, stderr)
	defer stop()
	if rp == nil {
		return code
	}
	d, out, r, err := rp.StepExperiment(ctx, sim.StepTest{From: *from, To: *to, At: *at, Duration: *duration})
	if *csvPath != "" && d.Len() > 0 {
		if err := writeStepCSV(*csvPath, d); err != nil {
			return fail(stderr, name, err, 1)
		}
	}
	if err != nil {
		return fail(stderr, name, err, 1)
	}
	source := fmt.Sprintf("MariaDB step test %g to %g msg/s at %v", *from, *to, *at)
	if *plotPath != "" {
		if err := lab.IdentifyFigure(source, d, r).WriteFile(*plotPath); err != nil {
			return fail(stderr, name, err, 1)
		}
	}
	if *asJSON {
		return printJSON(stdout, stderr, out)
	}
	printRealStep(stdout, source, d.Len(), out)
	if out.Lost != 0 {
		return 1
	}
	return 0
}

// printRealStep prints the model that n samples of the step test source
// identified.
func printRealStep(w io.Writer, source string, n int, out dbload.StepReport) {
	m := out.Model
	fmt.Fprintf(w, "identified from %d samples of %s (cores %g, scan rows %d):\n", n, source, out.Cores, out.ScanRows)
	fmt.Fprintf(w, "  gain       %.4g points of CPU per message/s\n", m.Gain)
	fmt.Fprintf(w, "  tau        %v\n", seconds(m.Tau).Round(10*time.Millisecond))
	fmt.Fprintf(w, "  dead time  %v\n", seconds(m.DeadTime).Round(10*time.Millisecond))
	fmt.Fprintf(w, "  base       %.3g %%\n", m.Base)
	fmt.Fprintf(w, "  rmse       %.3g points, noise sd %.3g points\n", out.RMSE, out.NoiseSD)
	fmt.Fprintf(w, "  taken      %.1f then %.1f msg/s (allowed %g, %g); lost %d\n", out.TakenFrom, out.TakenTo, out.StepFrom, out.StepTo, out.Lost)
}

// seconds is s seconds as a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// addCompareMariaDBFlags declares the flags of `lab compare --plant
// mariadb` beyond the real plant's: c gets their values when fs parses.
// modelPath is --model.
func addCompareMariaDBFlags(fs *flag.FlagSet, c *dbload.CompareConfig) (list, modelPath *string) {
	list = fs.String("controllers", "fixed,pi,pi-aw-spf-ff,smith", "comma-separated controllers: "+strings.Join(lab.Controllers(), ", "))
	modelPath = fs.String("model", "", "model JSON from `sluice lab step --plant mariadb --json` (default: run a step test first)")
	fs.Float64Var(&c.StepFrom, "step-from", 10, "step test: rate before the step")
	fs.Float64Var(&c.StepTo, "step-to", 40, "step test: rate after the step")
	fs.Float64Var(&c.Setpoint, "setpoint", 30, "CPU setpoint, percent")
	fs.DurationVar(&c.Tick, "tick", 10*time.Second, "controller tick")
	fs.DurationVar(&c.MetricPeriod, "metric-period", 10*time.Second, "metric period (averaging)")
	fs.DurationVar(&c.MetricDelay, "metric-delay", 10*time.Second, "publication delay after the period ends")
	fs.DurationVar(&c.Duration, "duration", 5*time.Minute, "length of each controller's run")
	fs.Float64Var(&c.MaxRate, "max-rate", 120, "largest rate a controller may allow, messages/s")
	fs.DurationVar(&c.DisturbanceAt, "disturbance-at", 100*time.Second, "start of the outside load")
	fs.DurationVar(&c.DisturbanceFor, "disturbance-for", 100*time.Second, "length of the outside load")
	fs.Float64Var(&c.DisturbanceQPS, "disturbance-qps", 20, "outside load: aggregate queries per second of the load generator")
	fs.DurationVar(&c.Rest, "rest", 15*time.Second, "pause between runs, so the database returns to idle")
	return list, modelPath
}

// readModel reads the model that `lab step --plant mariadb --json` wrote
// to path.
func readModel(path string) (*dbload.StepReport, error) {
	var step dbload.StepReport
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &step)
	}
	if err != nil {
		return nil, err
	}
	return &step, nil
}

// runLabCompareMariaDB is `sluice lab compare --plant mariadb`.
func runLabCompareMariaDB(args []string, stdout, stderr io.Writer) int {
	const name = "sluice lab compare --plant mariadb"
	fs := newFlagSet(name, name+" [--model FILE | --step-from R --step-to R] [--controllers LIST] [--json] [--plot FILE]",
		"Closed loop on the real database: identify MariaDB by a step test (or read the model\n"+
			"that `sluice lab step --plant mariadb --json` wrote), tune every controller from it as\n"+
			"the simulated lab does, measure the disturbance (the load generator alone), then run\n"+
			"each controller in turn for --duration on the same scenario: setpoint, a CloudWatch-like\n"+
			"pipeline of --metric-period averages published --metric-delay late, a tick of --tick,\n"+
			"and the load generator from --disturbance-at for --disturbance-for.")
	rf := addRealPlantFlags(fs)
	c := dbload.CompareConfig{Logf: func(format string, a ...any) { fmt.Fprintf(stderr, name+": "+format+"\n", a...) }}
	list, modelPath := addCompareMariaDBFlags(fs, &c)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	plotPath := fs.String("plot", "", "write a plot of every run (.svg or .png)")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	var err error
	if c.Controllers, err = lab.ParseControllers(*list); err != nil {
		fmt.Fprintf(stderr, "%s: --controllers: %v\n", name, err)
		return 2
	}
	ctx, rp, stop, code := rf.start(name, *plotPath, stderr)
	defer stop()
	if rp == nil {
		return code
	}
	if *modelPath != "" {
		if c.Model, err = readModel(*modelPath); err != nil {
			fmt.Fprintf(stderr, "%s: --model: %v\n", name, err)
			return 2
		}
	}
	out, s, err := rp.Compare(ctx, c)
	if err != nil {
		var bad *dbload.InvalidScenarioError
		if errors.As(err, &bad) {
			return fail(stderr, name, err, 2)
		}
		return fail(stderr, name, err, 1)
	}
	if *plotPath != "" {
		if err := realCompareFigure(s, out).WriteFile(*plotPath); err != nil {
			fmt.Fprintf(stderr, "%s: plot: %v\n", name, err)
			return 1
		}
	}
	if *asJSON {
		if code := printJSON(stdout, stderr, out); code != 0 {
			return code
		}
	} else {
		printCompare(stdout, out.Report)
		fmt.Fprintf(stdout, "\ndisturbance: %g queries/s, %.1f points measured alone; cores %g; scan rows %d\n", out.DisturbanceQPS, out.DisturbanceMeasuredPP, out.Cores, out.ScanRows)
	}
	if out.Lost() != 0 {
		return 1
	}
	return 0
}

// realCompareFigure is the simulated lab's figure of the comparison on
// the real plant, its axes fitted to the real CPU.
func realCompareFigure(s sim.Scenario, out dbload.CompareReport) plot.Figure {
	fig := lab.CompareFigure(s, out.Report)
	fig.Title = fmt.Sprintf("sluice lab compare --plant mariadb: loop dead time %.0f s, iae_bound %.0f point-s", out.LoopDeadTimeS, out.IAEBound)
	for i := range fig.Panels {
		fig.Panels[i].YMax = 0 // real CPU: let the axis fit
	}
	return fig
}

// plantArg finds --plant NAME (or -plant, =NAME) in args and returns the
// name ("sim" when absent) and args without it, so that `lab step` and `lab
// compare` can hand the real plant over to this file.
func plantArg(args []string) (plant string, rest []string) {
	plant = "sim"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "plant" {
			if hasVal {
				plant = val
			} else if i+1 < len(args) {
				plant = args[i+1]
				i++
			}
			continue
		}
		rest = append(rest, a)
	}
	return plant, rest
}

// realPlantDispatch runs the real-plant version of a lab experiment when
// args ask for --plant mariadb; handled is false for the simulated plant.
func realPlantDispatch(args []string, real func([]string, io.Writer, io.Writer) int, stdout, stderr io.Writer) (code int, handled bool) {
	plant, rest := plantArg(args)
	switch plant {
	case "sim":
		return 0, false
	case "mariadb":
		return real(rest, stdout, stderr), true
	}
	fmt.Fprintf(stderr, "--plant %q: want sim or mariadb\n", plant)
	return 2, true
}
