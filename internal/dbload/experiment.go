package dbload

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// Config is the real plant of the lab's experiments on MariaDB (`sluice
// lab step --plant mariadb`, `sluice lab compare --plant mariadb`): where
// the database is, how its CPU is measured, what each message costs.
type Config struct {
	// DSN is the server's (go-sql-driver format); its user must be able
	// to create Database, which the experiment creates and uses.
	DSN, Database string
	// Process is the command name of the server whose CPU is measured,
	// PID its pid (0: find Process); Cores the cores that 100 % CPU
	// means (0: the process's CPU affinity and cgroup quota).
	Process string
	PID     int
	Cores   float64
	// ScanRows of DataRows rows each message's aggregate reads.
	ScanRows, DataRows int
	// Workers consumers store messages, Batch per insert.
	Workers, Batch int
	// Sample is the sampling period of the database's CPU.
	Sample time.Duration
	// Progress, when set, sees every sample of every experiment.
	Progress func(t time.Duration, cpu, allowed, processed float64)
}

// RealPlant is an opened real plant: the database with the workload
// installed, and the sampler of its server's CPU.
type RealPlant struct {
	Config
	DB  *sql.DB
	CPU *cpupub.Sampler
}

// Open creates c's database when it does not exist, installs the workload
// in it and finds the server's process. The caller closes the plant.
func Open(ctx context.Context, c Config) (*RealPlant, error) {
	if c.DSN == "" {
		return nil, fmt.Errorf("no database: set --dsn or SLUICE_MYSQL_DSN (make up; eval \"$(make -s env)\")")
	}
	cfg, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("--dsn: %w", err)
	}
	if err := createDatabase(ctx, *cfg, c.Database); err != nil {
		return nil, err
	}
	cfg.DBName = c.Database
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(c.Workers + 8)
	if err := Install(ctx, db, Workload{DataRows: c.DataRows, ScanRows: c.ScanRows}); err != nil {
		db.Close()
		return nil, err
	}
	var find func() (int, error)
	if c.PID == 0 {
		find = cpupub.Named(c.Process)
	}
	s, err := cpupub.NewSampler(c.PID, find, c.Cores)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &RealPlant{Config: c, DB: db, CPU: s}, nil
}

// createDatabase creates database name on the server of cfg when it does
// not exist.
func createDatabase(ctx context.Context, cfg mysql.Config, name string) error {
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+strings.ReplaceAll(name, "`", "")+"`"); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Close closes the database.
func (rp *RealPlant) Close() error { return rp.DB.Close() }

// Lab is a lab on the plant whose messages carry prefix in their ids.
func (rp *RealPlant) Lab(prefix string) *Lab {
	return &Lab{
		Plant:    &Plant{DB: rp.DB, Prefix: prefix, Workers: rp.Workers, BatchSize: rp.Batch},
		CPU:      rp.CPU,
		Step:     rp.Sample,
		Progress: rp.Progress,
	}
}

// StepReport is what `lab step --plant mariadb --json` prints.
type StepReport struct {
	Plant   string          `json:"plant"`
	Model   lab.FittedModel `json:"model"`
	RMSE    float64         `json:"rmse"`
	NoiseSD float64         `json:"noise_sd"`
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

// StepExperiment runs step test st on the plant and fits a model to it. It
// returns the test's data whenever the test ran, also when the fit failed
// (the error then says "identify").
func (rp *RealPlant) StepExperiment(ctx context.Context, st sim.StepTest) (ident.Data, StepReport, ident.Result, error) {
	l := rp.Lab(fmt.Sprintf("step-%d", time.Now().UnixNano()))
	d, err := l.StepTest(ctx, st)
	if err != nil {
		return ident.Data{}, StepReport{}, ident.Result{}, err
	}
	taken, _, _ := l.Plant.Counts()
	_, distinct, err := l.Plant.CountStored(ctx)
	if err != nil {
		return ident.Data{}, StepReport{}, ident.Result{}, err
	}
	r, err := ident.Fit(d)
	if err != nil {
		return d, StepReport{}, ident.Result{}, fmt.Errorf("identify: %w", err)
	}
	out := StepReport{Plant: "mariadb", Model: lab.FitOf(r).Model, RMSE: r.RMSE, StepFrom: st.From, StepTo: st.To,
		StepAtS: st.At.Seconds(), SampleS: rp.Sample.Seconds(), Cores: rp.CPU.Cores, ScanRows: rp.ScanRows, Lost: taken - distinct}
	out.NoiseSD, out.TakenFrom, out.TakenTo = stepStats(d, st.At.Seconds())
	return d, out, r, nil
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

// CompareConfig is the closed-loop comparison on the real plant.
type CompareConfig struct {
	// Controllers run in turn, each for Duration.
	Controllers []string
	// Model is the plant's, from an earlier StepExperiment; nil: a step
	// test from StepFrom to StepTo msg/s identifies it first.
	Model            *StepReport
	StepFrom, StepTo float64
	// Setpoint (CPU, percent), Tick, the metric pipeline (MetricPeriod
	// averages published MetricDelay late) and MaxRate (msg/s) make the
	// scenario; the load generator runs at DisturbanceQPS aggregate
	// queries/s from DisturbanceAt for DisturbanceFor.
	Setpoint                      float64
	Tick, MetricPeriod            time.Duration
	MetricDelay, Duration         time.Duration
	MaxRate                       float64
	DisturbanceAt, DisturbanceFor time.Duration
	DisturbanceQPS                float64
	// Rest is the pause before each run, so the database returns to idle.
	Rest time.Duration
	// Logf, when set, sees the progress of the comparison.
	Logf func(format string, a ...any)
}

func (c CompareConfig) logf(format string, a ...any) {
	if c.Logf != nil {
		c.Logf(format, a...)
	}
}

// CompareReport is what `lab compare --plant mariadb --json` prints: the
// simulated lab's report, plus what only a real plant has.
type CompareReport struct {
	Plant string `json:"plant"`
	lab.Report
	// DisturbanceQPS is the load generator's rate; DisturbanceMeasuredPP
	// the CPU it added when measured alone, points.
	DisturbanceQPS        float64      `json:"disturbance_qps"`
	DisturbanceMeasuredPP float64      `json:"disturbance_measured_pp"`
	Cores                 float64      `json:"cores"`
	ScanRows              int          `json:"scan_rows"`
	Real                  []RunSummary `json:"real"`
}

// RunSummary is what the database holds after each controller's run.
type RunSummary struct {
	Controller   string  `json:"controller"`
	Taken        int64   `json:"taken"`
	Rows         int64   `json:"rows"`
	Duplicates   int64   `json:"duplicates"`
	StoreRetries int64   `json:"store_retries"`
	MeanCPU      float64 `json:"mean_cpu"`
	MeanRate     float64 `json:"mean_rate"`
}

// Lost is the messages lost over every run.
func (r CompareReport) Lost() int64 {
	lost := int64(0)
	for _, x := range r.Results {
		lost += x.Lost
	}
	return lost
}

// InvalidScenarioError is a comparison whose flags make a scenario the
// simulator refuses (bad input rather than a failed run).
type InvalidScenarioError struct{ Err error }

var _ error = (*InvalidScenarioError)(nil)

func (e *InvalidScenarioError) Error() string { return e.Err.Error() }

// Unwrap is the scenario's error.
func (e *InvalidScenarioError) Unwrap() error { return e.Err }

// Compare identifies the plant (or takes c.Model), tunes every controller
// from the model as the simulated lab does, measures the disturbance (the
// load generator alone), then runs each controller in turn on the same
// scenario, which it returns with the report. A scenario the simulator
// refuses is an *InvalidScenarioError.
func (rp *RealPlant) Compare(ctx context.Context, c CompareConfig) (CompareReport, sim.Scenario, error) {
	step, err := rp.compareModel(ctx, c)
	if err != nil {
		return CompareReport{}, sim.Scenario{}, err
	}
	model := control.FOPDT{Gain: step.Model.Gain, Tau: secs(step.Model.Tau), DeadTime: secs(step.Model.DeadTime), Base: step.Model.Base}
	if model.Gain <= 0 {
		return CompareReport{}, sim.Scenario{}, fmt.Errorf("identified gain %v: the step test did not move the CPU; raise --scan-rows or the step", model.Gain)
	}
	c.logf("model: gain %.4g, tau %v, dead time %v, base %.2f", model.Gain, model.Tau, model.DeadTime, model.Base)
	gen := &LoadGenerator{DB: rp.DB, Rate: c.DisturbanceQPS, ScanRows: rp.ScanRows, DataRows: rp.DataRows, Workers: 2}
	dSize, err := measureDisturbance(ctx, rp.CPU, gen, 20*time.Second)
	if err != nil {
		return CompareReport{}, sim.Scenario{}, fmt.Errorf("measure disturbance: %w", err)
	}
	c.logf("disturbance %g queries/s adds %.1f points of CPU", c.DisturbanceQPS, dSize)
	s := c.scenario(model, dSize, rp.Sample)
	if err := s.Validate(); err != nil {
		return CompareReport{}, sim.Scenario{}, &InvalidScenarioError{err}
	}
	out := rp.compareReport(c, s, step, dSize)
	// The policy sees the measurement noise of one metric period: the 1-s
	// noise of the step test, averaged over the period.
	identified := lab.Plant{Model: model, NoiseSD: out.Model.NoiseSD}
	for _, name := range c.Controllers {
		if err := rp.compareRun(ctx, c, s, identified, gen, name, &out); err != nil {
			return CompareReport{}, sim.Scenario{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return out, s, nil
}

// compareModel is c.Model, or the model a step test identifies.
func (rp *RealPlant) compareModel(ctx context.Context, c CompareConfig) (StepReport, error) {
	if c.Model != nil {
		return *c.Model, nil
	}
	c.logf("step test %g -> %g msg/s", c.StepFrom, c.StepTo)
	l := rp.Lab(fmt.Sprintf("cstep-%d", time.Now().UnixNano()))
	d, err := l.StepTest(ctx, sim.StepTest{From: c.StepFrom, To: c.StepTo, At: 30 * time.Second, Duration: 100 * time.Second})
	if err != nil {
		return StepReport{}, fmt.Errorf("step test: %w", err)
	}
	r, err := ident.Fit(d)
	if err != nil {
		return StepReport{}, fmt.Errorf("identify: %w", err)
	}
	step := StepReport{Model: lab.FitOf(r).Model, RMSE: r.RMSE, StepFrom: c.StepFrom, StepTo: c.StepTo}
	step.NoiseSD, step.TakenFrom, step.TakenTo = stepStats(d, 30)
	return step, nil
}

// scenario is the comparison's scenario on plant model, with the
// disturbance of dSize points and the true CPU sampled every sample.
func (c CompareConfig) scenario(model control.FOPDT, dSize float64, sample time.Duration) sim.Scenario {
	return sim.Scenario{
		Plant: model, MetricPeriod: c.MetricPeriod, MetricDelay: c.MetricDelay, Tick: c.Tick, Setpoint: c.Setpoint,
		Disturbances: []sim.Disturbance{{At: c.DisturbanceAt, Duration: c.DisturbanceFor, Size: dSize}},
		ProducerRate: 2 * c.MaxRate, Backlog: 1_000_000, MaxRate: c.MaxRate, Duration: c.Duration, Step: sample,
	}
}

// compareReport is the report of the comparison on s before its runs.
func (rp *RealPlant) compareReport(c CompareConfig, s sim.Scenario, step StepReport, dSize float64) CompareReport {
	model := s.Plant
	noise := step.NoiseSD / math.Sqrt(math.Max(1, c.MetricPeriod.Seconds()/rp.Sample.Seconds()))
	out := CompareReport{Plant: "mariadb", DisturbanceQPS: c.DisturbanceQPS, DisturbanceMeasuredPP: dSize, Cores: rp.CPU.Cores, ScanRows: rp.ScanRows}
	out.Report = lab.Report{
		Model: lab.Model{Gain: model.Gain, TauS: model.Tau.Seconds(), DeadTimeS: model.DeadTime.Seconds(), Base: model.Base,
			RMSE: step.RMSE, NoiseSD: noise, StepFrom: step.StepFrom, StepTo: step.StepTo},
		LoopDeadTimeS: s.LoopDeadTime(model.DeadTime).Seconds(),
		IAEBound:      s.IAEBound(),
		Scenario: lab.ScenarioView{Gain: model.Gain, Base: model.Base, TauS: model.Tau.Seconds(), DeadTimeS: model.DeadTime.Seconds(),
			MetricPeriodS: c.MetricPeriod.Seconds(), MetricDelayS: c.MetricDelay.Seconds(), TickS: c.Tick.Seconds(), Setpoint: c.Setpoint,
			SetpointChg:  []map[string]any{},
			Disturbances: []map[string]any{{"at_s": c.DisturbanceAt.Seconds(), "duration_s": c.DisturbanceFor.Seconds(), "size": dSize}},
			ProducerRate: s.ProducerRate, Backlog: s.Backlog, MaxRate: c.MaxRate, DurationS: c.Duration.Seconds()},
	}
	return out
}

// compareRun runs controller name on s after a rest and adds its result
// to out.
func (rp *RealPlant) compareRun(ctx context.Context, c CompareConfig, s sim.Scenario, identified lab.Plant, gen *LoadGenerator, name string, out *CompareReport) error {
	p, tuning, err := lab.NewPolicy(name, s, identified, lab.Gains{})
	if err != nil {
		return err
	}
	if err := rest(ctx, c.Rest); err != nil {
		return fmt.Errorf("rest before the run: %w", err)
	}
	c.logf("running %s for %v", name, c.Duration)
	l := rp.Lab(fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))
	l.Disturb = gen
	res, err := l.Run(ctx, s, p)
	if err != nil {
		return err
	}
	m := res.Metrics
	out.Results = append(out.Results, lab.Result{Controller: name, IAE: m.IAE, IAERatio: m.IAE / out.IAEBound,
		StartOvershootPP: m.StartOvershoot, ViolationS: m.ViolationSeconds, SettlingS: m.Settling,
		Processed: m.Processed, Lost: m.Lost, MaxCPU: m.MaxCPU, Tuning: tuning, Series: res.Series})
	out.Real = append(out.Real, RunSummary{Controller: name, Taken: res.Counts.Produced, Rows: res.Rows,
		Duplicates: res.Rows - res.Distinct, StoreRetries: res.StoreRetries, MeanCPU: mean(res.Series.CPU), MeanRate: mean(res.Series.Processed)})
	c.logf("%s: IAE %.0f, overshoot %.1f, lost %d", name, m.IAE, m.StartOvershoot, m.Lost)
	return nil
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

// rest waits d or until ctx ends.
func rest(ctx context.Context, d time.Duration) error { return consume.WallClock{}.Sleep(ctx, d) }

// measureDisturbance returns the CPU the load generator adds: the mean
// over d with it running minus the mean over d without.
func measureDisturbance(ctx context.Context, cpu cpupub.CPUReader, gen *LoadGenerator, d time.Duration) (float64, error) {
	avg := func() (float64, error) {
		a, err := cpu.Sample()
		if err != nil {
			return 0, err
		}
		if err := rest(ctx, d); err != nil {
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
