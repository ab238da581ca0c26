package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// realPlantFlags are the flags of the real-plant experiments: where the
// database is, how its CPU is measured, what each message costs.
type realPlantFlags struct {
	dsn, database, process string
	pid                    int
	cores                  float64
	scanRows, dataRows     int
	workers, batch         int
	sample                 time.Duration
	verbose                bool
}

func addRealPlantFlags(fs *flag.FlagSet) *realPlantFlags {
	f := &realPlantFlags{}
	fs.StringVar(&f.dsn, "dsn", os.Getenv("SLUICE_MYSQL_DSN"), "MariaDB DSN (go-sql-driver format; default $SLUICE_MYSQL_DSN); its user must be able to create --database")
	fs.StringVar(&f.database, "database", "sluice_lab", "database the experiment creates and uses (messages table, workload trigger)")
	fs.StringVar(&f.process, "process", "mariadbd", "command name of the database server process whose CPU is measured")
	fs.IntVar(&f.pid, "pid", 0, "pid of the database server process (default: find --process)")
	fs.Float64Var(&f.cores, "cores", 0, "cores that 100 % CPU means (default: the process's CPU affinity and cgroup quota)")
	fs.IntVar(&f.scanRows, "scan-rows", dbload.DefaultScanRows, "rows each message's aggregate reads: the per-message CPU cost")
	fs.IntVar(&f.dataRows, "data-rows", dbload.DefaultDataRows, "rows of the workload's data table")
	fs.IntVar(&f.workers, "workers", 4, "concurrent consumers (connections) storing messages")
	fs.IntVar(&f.batch, "batch", 1, "messages per insert (1: a smooth load; 10: SQS batches)")
	fs.DurationVar(&f.sample, "sample", time.Second, "sampling period of the database's CPU")
	fs.BoolVar(&f.verbose, "v", false, "print every sample to stderr")
	fs.String("plant", "mariadb", "the plant (mariadb here)")
	return f
}

// realPlant is an opened real plant.
type realPlant struct {
	db    *sql.DB
	cpu   *cpupub.Sampler
	cores float64
	pid   int
}

func (f *realPlantFlags) open(ctx context.Context) (*realPlant, error) {
	if f.dsn == "" {
		return nil, fmt.Errorf("no database: set --dsn or SLUICE_MYSQL_DSN (make up; eval \"$(make -s env)\")")
	}
	cfg, err := mysql.ParseDSN(f.dsn)
	if err != nil {
		return nil, fmt.Errorf("--dsn: %w", err)
	}
	adminCfg := *cfg
	adminCfg.DBName = ""
	admin, err := sql.Open("mysql", adminCfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(f.database, "`", "")+"`"); err != nil {
		return nil, fmt.Errorf("create database %s: %w", f.database, err)
	}
	cfg.DBName = f.database
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(f.workers + 8)
	if err := dbload.Install(ctx, db, dbload.Workload{DataRows: f.dataRows, ScanRows: f.scanRows}); err != nil {
		db.Close()
		return nil, err
	}
	var find func() (int, error)
	if f.pid == 0 {
		find = cpupub.Named(f.process)
	}
	s, err := cpupub.NewSampler(f.pid, find, f.cores)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &realPlant{db: db, cpu: s, cores: s.Cores, pid: s.PID}, nil
}

// start checks --plot (plotPath) and opens the real plant under a context
// that an interrupt ends. When it cannot, it tells why on stderr and
// returns no plant and the exit code: 2 for a bad --plot, 1 when the plant
// does not open. stop releases what it opened.
func (f *realPlantFlags) start(name, plotPath string, stderr io.Writer) (ctx context.Context, rp *realPlant, stop func(), code int) {
	if badPlotPath(name, plotPath, stderr) {
		return context.Background(), nil, func() {}, 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	rp, err := f.open(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ctx, nil, cancel, 1
	}
	return ctx, rp, func() { rp.db.Close(); cancel() }, 0
}

func (f *realPlantFlags) lab(rp *realPlant, prefix string, stderr io.Writer) *dbload.Lab {
	l := &dbload.Lab{
		Plant: &dbload.Plant{DB: rp.db, Prefix: prefix, Workers: f.workers, BatchSize: f.batch},
		CPU:   rp.cpu,
		Step:  f.sample,
	}
	if f.verbose {
		l.Progress = func(t time.Duration, cpu, allowed, processed float64) {
			fmt.Fprintf(stderr, "t=%5.0fs cpu=%5.1f%% allowed=%6.1f processed=%6.1f\n", t.Seconds(), cpu, allowed, processed)
		}
	}
	return l
}

// realStepOutput is what `lab step --plant mariadb --json` prints.
type realStepOutput struct {
	Plant   string      `json:"plant"`
	Model   modelOutput `json:"model"`
	RMSE    float64     `json:"rmse"`
	NoiseSD float64     `json:"noise_sd"`
	// StepFrom and StepTo are the allowed rates; TakenFrom and TakenTo the
	// mean rates the database actually took before and after the step.
	StepFrom  float64 `json:"step_from"`
	StepTo    float64 `json:"step_to"`
	TakenFrom float64 `json:"taken_from"`
	TakenTo   float64 `json:"taken_to"`
	StepAtS   float64 `json:"step_at_s"`
	SampleS   float64 `json:"sample_s"`
	Cores     float64 `json:"cores"`
	ScanRows  int     `json:"scan_rows"`
	Lost      int64   `json:"lost"`
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
	l := rf.lab(rp, fmt.Sprintf("step-%d", time.Now().UnixNano()), stderr)
	d, err := l.StepTest(ctx, sim.StepTest{From: *from, To: *to, At: *at, Duration: *duration})
	if err != nil {
		return fail(stderr, name, err, 1)
	}
	taken, _, _ := l.Plant.Counts()
	_, distinct, err := l.Plant.CountStored(ctx)
	if err != nil {
		return fail(stderr, name, err, 1)
	}
	if *csvPath != "" {
		if err := writeStepCSV(*csvPath, d); err != nil {
			return fail(stderr, name, err, 1)
		}
	}
	r, err := ident.Fit(d)
	if err != nil {
		fmt.Fprintf(stderr, "%s: identify: %v\n", name, err)
		return 1
	}
	source := fmt.Sprintf("MariaDB step test %g to %g msg/s at %v", *from, *to, *at)
	if *plotPath != "" {
		if err := identifyFigure(source, d, r).WriteFile(*plotPath); err != nil {
			return fail(stderr, name, err, 1)
		}
	}
	out := realStepOutput{Plant: "mariadb", Model: newIdentifyOutput(r).Model, RMSE: r.RMSE, StepFrom: *from, StepTo: *to,
		StepAtS: at.Seconds(), SampleS: rf.sample.Seconds(), Cores: rp.cores, ScanRows: rf.scanRows, Lost: taken - distinct}
	out.NoiseSD, out.TakenFrom, out.TakenTo = stepStats(d, at.Seconds())
	if *asJSON {
		return printJSON(stdout, stderr, out)
	}
	fmt.Fprintf(stdout, "identified from %d samples of %s (cores %g, scan rows %d):\n", d.Len(), source, rp.cores, rf.scanRows)
	fmt.Fprintf(stdout, "  gain       %.4g points of CPU per message/s\n", r.Model.Gain)
	fmt.Fprintf(stdout, "  tau        %v\n", r.Model.Tau.Round(10*time.Millisecond))
	fmt.Fprintf(stdout, "  dead time  %v\n", r.Model.DeadTime.Round(10*time.Millisecond))
	fmt.Fprintf(stdout, "  base       %.3g %%\n", r.Model.Base)
	fmt.Fprintf(stdout, "  rmse       %.3g points, noise sd %.3g points\n", r.RMSE, out.NoiseSD)
	fmt.Fprintf(stdout, "  taken      %.1f then %.1f msg/s (allowed %g, %g); lost %d\n", out.TakenFrom, out.TakenTo, *from, *to, out.Lost)
	if out.Lost != 0 {
		return 1
	}
	return 0
}

// stepStats returns the standard deviation of the output before the step
// and the mean input before and after it.
func stepStats(d ident.Data, at float64) (sd, uFrom, uTo float64) {
	var ys []float64
	var nf, nt float64
	for i, t := range d.T {
		if t < at {
			ys = append(ys, d.Y[i])
			uFrom += d.U[i]
			nf++
		} else {
			uTo += d.U[i]
			nt++
		}
	}
	if nf > 0 {
		uFrom /= nf
	}
	if nt > 0 {
		uTo /= nt
	}
	// Skip the first samples, where the consumers start.
	if len(ys) > 5 {
		ys = ys[3:]
	}
	var m float64
	for _, y := range ys {
		m += y
	}
	m /= float64(max(len(ys), 1))
	for _, y := range ys {
		sd += (y - m) * (y - m)
	}
	return math.Sqrt(sd / float64(max(len(ys)-1, 1))), uFrom, uTo
}

// realCompareOutput is what `lab compare --plant mariadb --json` prints:
// the simulated lab's report, plus what only a real plant has.
type realCompareOutput struct {
	Plant string `json:"plant"`
	lab.Report
	// DisturbanceQPS is the load generator's rate; DisturbanceMeasuredPP
	// the CPU it added when measured alone, points.
	DisturbanceQPS        float64          `json:"disturbance_qps"`
	DisturbanceMeasuredPP float64          `json:"disturbance_measured_pp"`
	Cores                 float64          `json:"cores"`
	ScanRows              int              `json:"scan_rows"`
	Real                  []realRunSummary `json:"real"`
}

// realRunSummary is what the database holds after each controller's run.
type realRunSummary struct {
	Controller   string  `json:"controller"`
	Taken        int64   `json:"taken"`
	Rows         int64   `json:"rows"`
	Duplicates   int64   `json:"duplicates"`
	StoreRetries int64   `json:"store_retries"`
	MeanCPU      float64 `json:"mean_cpu"`
	MeanRate     float64 `json:"mean_rate"`
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
	list := fs.String("controllers", "fixed,pi,pi-aw-spf-ff,smith", "comma-separated controllers: "+strings.Join(lab.Controllers(), ", "))
	modelPath := fs.String("model", "", "model JSON from `sluice lab step --plant mariadb --json` (default: run a step test first)")
	from := fs.Float64("step-from", 10, "step test: rate before the step")
	to := fs.Float64("step-to", 40, "step test: rate after the step")
	setpoint := fs.Float64("setpoint", 30, "CPU setpoint, percent")
	tick := fs.Duration("tick", 10*time.Second, "controller tick")
	period := fs.Duration("metric-period", 10*time.Second, "metric period (averaging)")
	delay := fs.Duration("metric-delay", 10*time.Second, "publication delay after the period ends")
	duration := fs.Duration("duration", 5*time.Minute, "length of each controller's run")
	maxRate := fs.Float64("max-rate", 120, "largest rate a controller may allow, messages/s")
	dAt := fs.Duration("disturbance-at", 100*time.Second, "start of the outside load")
	dFor := fs.Duration("disturbance-for", 100*time.Second, "length of the outside load")
	dQPS := fs.Float64("disturbance-qps", 20, "outside load: aggregate queries per second of the load generator")
	rest := fs.Duration("rest", 15*time.Second, "pause between runs, so the database returns to idle")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	plotPath := fs.String("plot", "", "write a plot of every run (.svg or .png)")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	names, err := lab.ParseControllers(*list)
	if err != nil {
		fmt.Fprintf(stderr, "%s: --controllers: %v\n", name, err)
		return 2
	}
	ctx, rp, stop, code := rf.start(name, *plotPath, stderr)
	defer stop()
	if rp == nil {
		return code
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, name+": "+format+"\n", a...) }

	// 1. The model.
	var model control.FOPDT
	var step realStepOutput
	if *modelPath != "" {
		b, err := os.ReadFile(*modelPath)
		if err == nil {
			err = json.Unmarshal(b, &step)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: --model: %v\n", name, err)
			return 2
		}
	} else {
		logf("step test %g -> %g msg/s", *from, *to)
		l := rf.lab(rp, fmt.Sprintf("cstep-%d", time.Now().UnixNano()), stderr)
		d, err := l.StepTest(ctx, sim.StepTest{From: *from, To: *to, At: 30 * time.Second, Duration: 100 * time.Second})
		if err != nil {
			fmt.Fprintf(stderr, "%s: step test: %v\n", name, err)
			return 1
		}
		r, err := ident.Fit(d)
		if err != nil {
			fmt.Fprintf(stderr, "%s: identify: %v\n", name, err)
			return 1
		}
		step = realStepOutput{Model: newIdentifyOutput(r).Model, RMSE: r.RMSE, StepFrom: *from, StepTo: *to}
		step.NoiseSD, step.TakenFrom, step.TakenTo = stepStats(d, 30)
	}
	model = control.FOPDT{Gain: step.Model.Gain, Tau: secs(step.Model.Tau), DeadTime: secs(step.Model.DeadTime), Base: step.Model.Base}
	if model.Gain <= 0 {
		fmt.Fprintf(stderr, "%s: identified gain %v: the step test did not move the CPU; raise --scan-rows or the step\n", name, model.Gain)
		return 1
	}
	logf("model: gain %.4g, tau %v, dead time %v, base %.2f", model.Gain, model.Tau, model.DeadTime, model.Base)

	// 2. The disturbance, measured alone.
	gen := &dbload.LoadGenerator{DB: rp.db, Rate: *dQPS, ScanRows: rf.scanRows, DataRows: rf.dataRows, Workers: 2}
	dSize, err := measureDisturbance(ctx, rp.cpu, gen, 20*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "%s: measure disturbance: %v\n", name, err)
		return 1
	}
	logf("disturbance %g queries/s adds %.1f points of CPU", *dQPS, dSize)

	s := sim.Scenario{
		Plant: model, MetricPeriod: *period, MetricDelay: *delay, Tick: *tick, Setpoint: *setpoint,
		Disturbances: []sim.Disturbance{{At: *dAt, Duration: *dFor, Size: dSize}},
		ProducerRate: 2 * *maxRate, Backlog: 1_000_000, MaxRate: *maxRate, Duration: *duration, Step: rf.sample,
	}
	if err := s.Validate(); err != nil {
		return fail(stderr, name, err, 2)
	}
	// The policy sees the measurement noise of one metric period: the 1-s
	// noise of the step test, averaged over the period.
	noise := step.NoiseSD / math.Sqrt(math.Max(1, period.Seconds()/rf.sample.Seconds()))
	identified := lab.Plant{Model: model, NoiseSD: noise}
	loopDead := s.LoopDeadTime(model.DeadTime)
	out := realCompareOutput{Plant: "mariadb", DisturbanceQPS: *dQPS, DisturbanceMeasuredPP: dSize, Cores: rp.cores, ScanRows: rf.scanRows}
	out.Report = lab.Report{
		Model: lab.Model{Gain: model.Gain, TauS: model.Tau.Seconds(), DeadTimeS: model.DeadTime.Seconds(), Base: model.Base,
			RMSE: step.RMSE, NoiseSD: noise, StepFrom: step.StepFrom, StepTo: step.StepTo},
		LoopDeadTimeS: loopDead.Seconds(),
		IAEBound:      s.IAEBound(),
		Scenario: lab.ScenarioView{Gain: model.Gain, Base: model.Base, TauS: model.Tau.Seconds(), DeadTimeS: model.DeadTime.Seconds(),
			MetricPeriodS: period.Seconds(), MetricDelayS: delay.Seconds(), TickS: tick.Seconds(), Setpoint: *setpoint,
			SetpointChg: []map[string]any{}, Disturbances: []map[string]any{{"at_s": dAt.Seconds(), "duration_s": dFor.Seconds(), "size": dSize}},
			ProducerRate: s.ProducerRate, Backlog: s.Backlog, MaxRate: *maxRate, DurationS: duration.Seconds()},
	}

	// 3. Each controller on the same scenario.
	for _, c := range names {
		p, tuning, err := lab.NewPolicy(c, s, identified, lab.Gains{})
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", name, c, err)
			return 1
		}
		if err := restFor(ctx, *rest); err != nil {
			return 1
		}
		logf("running %s for %v", c, *duration)
		l := rf.lab(rp, fmt.Sprintf("%s-%d", c, time.Now().UnixNano()), stderr)
		l.Disturb = gen
		res, err := l.Run(ctx, s, p)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v\n", name, c, err)
			return 1
		}
		m := res.Metrics
		bound := out.IAEBound
		out.Results = append(out.Results, lab.Result{Controller: c, IAE: m.IAE, IAERatio: m.IAE / bound,
			StartOvershootPP: m.StartOvershoot, ViolationS: m.ViolationSeconds, SettlingS: m.Settling,
			Processed: m.Processed, Lost: m.Lost, MaxCPU: m.MaxCPU, Tuning: tuning, Series: res.Series})
		out.Real = append(out.Real, realRunSummary{Controller: c, Taken: res.Counts.Produced, Rows: res.Rows,
			Duplicates: res.Rows - res.Distinct, StoreRetries: res.StoreRetries, MeanCPU: mean(res.Series.CPU), MeanRate: mean(res.Series.Processed)})
		logf("%s: IAE %.0f, overshoot %.1f, lost %d", c, m.IAE, m.StartOvershoot, m.Lost)
	}
	if *plotPath != "" {
		fig := compareFigure(s, out.Report)
		fig.Title = fmt.Sprintf("sluice lab compare --plant mariadb: loop dead time %.0f s, iae_bound %.0f point-s", out.LoopDeadTimeS, out.IAEBound)
		for i := range fig.Panels {
			fig.Panels[i].YMax = 0 // real CPU: let the axis fit
		}
		if err := fig.WriteFile(*plotPath); err != nil {
			fmt.Fprintf(stderr, "%s: plot: %v\n", name, err)
			return 1
		}
	}
	lost := int64(0)
	for _, r := range out.Results {
		lost += r.Lost
	}
	if *asJSON {
		if code := printJSON(stdout, stderr, out); code != 0 {
			return code
		}
	} else {
		printCompare(stdout, out.Report)
		fmt.Fprintf(stdout, "\ndisturbance: %g queries/s, %.1f points measured alone; cores %g; scan rows %d\n", *dQPS, dSize, rp.cores, rf.scanRows)
	}
	if lost != 0 {
		return 1
	}
	return 0
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// restFor waits d or until ctx ends.
var restFor = consume.WallClock{}.Sleep

// measureDisturbance returns the CPU the load generator adds: the mean
// over d with it running minus the mean over d without.
func measureDisturbance(ctx context.Context, cpu cpupub.CPUReader, gen *dbload.LoadGenerator, d time.Duration) (float64, error) {
	avg := func() (float64, error) {
		a, err := cpu.Sample()
		if err != nil {
			return 0, err
		}
		if err := restFor(ctx, d); err != nil {
			return 0, err
		}
		b, err := cpu.Sample()
		if err != nil {
			return 0, err
		}
		return cpu.Utilization(a, b)
	}
	idle, err := avg()
	if err != nil {
		return 0, err
	}
	if err := gen.Start(ctx); err != nil {
		return 0, err
	}
	loaded, err := avg()
	gen.Stop()
	if err != nil {
		return 0, err
	}
	return loaded - idle, nil
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
