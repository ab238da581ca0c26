package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/plot"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
)

// runDemo is `sluice demo`: the embedded default. The reference scenario's
// simulated destination, regulated by the controller Lambda's tick code and
// drained by the consumers' code from an in-memory queue, in accelerated
// time; a live progress line, then a summary beside today's fixed rate and
// the path of a plot.
func runDemo(args []string, stdout, stderr io.Writer) int {
	f, code, done := parseDemo(args, stderr)
	if done {
		return code
	}
	d, rec, err := f.run(stderr)
	if err != nil {
		return fail(stderr, "sluice demo", err, 1)
	}
	if f.plotPath != "" {
		if err := os.MkdirAll(filepath.Dir(f.plotPath), 0o755); err != nil {
			return fail(stderr, "sluice demo", err, 1)
		}
		if err := demoFigure(d.s, d.res, d.fixed, d.other, d.cfg.NoReport).WriteFile(f.plotPath); err != nil {
			return fail(stderr, "sluice demo", err, 1)
		}
	}
	if f.asJSON {
		if err := printDemoJSON(stdout, d); err != nil {
			return fail(stderr, "sluice demo", err, 1)
		}
	} else {
		printDemoSummary(stdout, d.s, d.res, d.fixed, d.s.IAEBound(), d.wall, f.plotPath)
		printOnset(stdout, d.s, d.res.Series)
		printDriftNote(stdout, d.s, rec)
		if d.other != nil {
			printReportNote(stdout, d.cfg.NoReport, d.res, *d.other)
		}
	}
	if d.res.Counts.Lost() != 0 {
		fmt.Fprintf(stderr, "sluice demo: %d messages lost\n", d.res.Counts.Lost())
		return 1
	}
	return 0
}

// demoFlags are the flags of `sluice demo`.
type demoFlags struct {
	s                       sim.Scenario
	plotPath, histOut       string
	batch                   int
	poison                  int64
	asJSON, quiet, noReport bool
	controller              string
}

// parseDemo reads the flags of `sluice demo` from args. done says the
// command ends here with code (help, or bad usage told on stderr).
func parseDemo(args []string, stderr io.Writer) (f demoFlags, code int, done bool) {
	fs := newFlagSet("sluice demo", "sluice demo [flags]",
		"Runs the whole loop with no services: the reference scenario's simulated database,\n"+
			"the controller Lambda's tick code over in-memory DynamoDB items, and the consumers'\n"+
			"pacing code draining an in-memory queue, in accelerated time. Durations in Go syntax (90s, 120m).")
	fs.SetOutput(stderr)
	sf := addScenarioFlags(fs)
	fs.StringVar(&f.plotPath, "plot", filepath.Join("out", "demo.svg"), "write the run's plot to this file (.svg or .png); empty for none")
	fs.IntVar(&f.batch, "batch", 10, "consumer batch size, messages (10 is SQS's largest)")
	fs.Int64Var(&f.poison, "poison-every", 5000, "make every n-th message malformed to show the dead-letter path (0: none)")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as JSON instead of a table")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
	fs.StringVar(&f.histOut, "history-out", "", "write the loop's history (one point per tick, as the dashboard's HIST items) to this JSON file, for `sluice tune --from-history`")
	fs.StringVar(&f.controller, "controller", defaultDemoController, "the loop: "+lab.PIAWSPFF+" (the controller alone) or "+lab.Cascade+" (with the consumers' inner loop on the destination's latency; not with --no-report)")
	fs.BoolVar(&f.noReport, "no-report", false, "the consumers do not report what they stored: the controller runs on the CPU alone (the product before the report, for comparison)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return f, 0, true
		}
		return f, 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sluice demo: unexpected argument %q\n", fs.Arg(0))
		return f, 2, true
	}
	var err error
	if f.s, err = sf.Scenario(); err != nil {
		return f, fail(stderr, "sluice demo", err, 2), true
	}
	if f.controller != lab.PIAWSPFF && f.controller != lab.Cascade {
		fmt.Fprintf(stderr, "sluice demo: --controller %q: want %s or %s\n", f.controller, lab.PIAWSPFF, lab.Cascade)
		return f, 2, true
	}
	if f.batch <= 0 || f.poison < 0 {
		fmt.Fprintln(stderr, "sluice demo: --batch must be positive and --poison-every not negative")
		return f, 2, true
	}
	if badPlotPath("sluice demo", f.plotPath, stderr) {
		return f, 2, true
	}
	return f, 0, false
}

// run tunes the loop, runs the demo (with its progress on stderr unless
// quiet or JSON), writes --history-out, and runs the counterpart and the
// fixed-rate baseline: what the summary is made of.
func (f demoFlags) run(stderr io.Writer) (demoRun, *historyRecorder, error) {
	s := f.s
	ctrl, model, err := demo.Tune(s)
	if err != nil {
		return demoRun{}, nil, err
	}
	params := demo.DefaultParams(s, ctrl)
	cfg := demo.Config{Scenario: s, Params: params, BatchSize: f.batch, PoisonEvery: f.poison, NoReport: f.noReport}
	withInner(&cfg, f.controller, model)
	rec := newHistoryRecorder(s)
	rec.file.Params = params.Attrs(metricsources.All())
	cfg.OnTick = rec.record
	start := time.Now()
	live := !f.quiet && !f.asJSON
	if live {
		fmt.Fprintf(stderr, "step test identified gain %.4f pp per msg/s, tau %.0fs, dead time %.0fs, base %.1f%% (RMSE %.2f)\n",
			model.Gain, model.TauS, model.DeadTimeS, model.Base, model.RMSE)
		cfg.ProgressEvery = 2 * time.Minute
		cfg.Progress = func(p demo.Progress) { printProgress(stderr, p) }
	}
	res, err := demo.Run(context.Background(), cfg)
	if live {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return demoRun{}, nil, err
	}
	wall := time.Since(start)
	if f.histOut != "" {
		if err := rec.write(f.histOut); err != nil {
			return demoRun{}, nil, fmt.Errorf("--history-out: %w", err)
		}
	}
	other, err := demoCounterpart(s, cfg)
	if err != nil {
		return demoRun{}, nil, err
	}
	fixed, err := lab.Compare(s, lab.Options{Controllers: []string{lab.Fixed}})
	if err != nil {
		return demoRun{}, nil, fmt.Errorf("fixed-rate baseline: %w", err)
	}
	return demoRun{s: s, model: model, cfg: cfg, res: res, other: other, fixed: fixed, plot: f.plotPath, wall: wall, drift: rec.driftJSON(s)}, rec, nil
}

// demoRun is what the demo's summary is made of.
type demoRun struct {
	s     sim.Scenario
	model lab.Model
	cfg   demo.Config
	res   demo.Result
	other *demo.Result // the run with the report switched the other way; nil when none
	fixed lab.Report
	plot  string
	wall  time.Duration
	drift any // the model_drift summary of the run's history
}

// printDemoJSON prints the summary as one JSON object: the run, the fixed
// rate and, when there is one, the run with the report switched the other
// way (no_report or with_report).
func printDemoJSON(w io.Writer, d demoRun) error {
	bound := d.s.IAEBound()
	res := d.res
	out := map[string]any{
		"scenario": d.s, "model": d.model, "iae_bound": bound, "report": !d.cfg.NoReport,
		"sluice": map[string]any{"metrics": res.Metrics, "iae_ratio": res.Metrics.IAE / bound, "counts": res.Counts,
			"lost": res.Counts.Lost(), "ticks": res.Ticks, "rate_reads": res.RateReads, "fallbacks": res.Fallbacks},
		"plot": d.plot, "wall_s": d.wall.Seconds(), "model_drift": d.drift,
	}
	if len(d.fixed.Results) > 0 {
		out["fixed"] = d.fixed.Results[0]
	}
	if o := d.other; o != nil {
		key := "no_report"
		if d.cfg.NoReport {
			key = "with_report"
		}
		out[key] = map[string]any{"metrics": o.Metrics, "iae_ratio": o.Metrics.IAE / bound, "lost": o.Counts.Lost()}
	}
	return json.NewEncoder(w).Encode(out)
}

// demoCounterpart runs the demo again with the consumers' report switched
// the other way, quietly, when the traffic changes (bursts, producer
// changes) or the report was switched off: the closing note shows the two
// side by side. Nil when there is nothing to compare.
func demoCounterpart(s sim.Scenario, cfg demo.Config) (*demo.Result, error) {
	if !cfg.NoReport && len(s.Bursts) == 0 && len(s.ProducerChanges) == 0 {
		return nil, nil
	}
	cfg.NoReport = !cfg.NoReport
	cfg.Progress, cfg.OnTick = nil, nil
	if cfg.NoReport {
		cfg.Inner, cfg.Params.Inner = nil, nil // the inner loop needs the report (withInner)
	}
	res, err := demo.Run(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("run with the report switched %s: %w", onOff(!cfg.NoReport), err)
	}
	return &res, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// printReportNote is the closing note: the run with and without the
// consumers' report of what they stored (--no-report).
func printReportNote(w io.Writer, noReport bool, res, other demo.Result) {
	with, without := res, other
	if noReport {
		with, without = other, res
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "the consumers' report of what they stored (--no-report switches it off):")
	fmt.Fprintf(w, "%-22s %12s %12s\n", "", "report on", "report off")
	m1, m0 := with.Metrics, without.Metrics
	fmt.Fprintf(w, "%-22s %12.1f %12.1f\n", "max CPU (%)", m1.MaxCPU, m0.MaxCPU)
	fmt.Fprintf(w, "%-22s %12.0f %12.0f\n", "time above sp+5 (s)", m1.ViolationSeconds, m0.ViolationSeconds)
	fmt.Fprintf(w, "%-22s %12d %12d\n", "messages processed", m1.Processed, m0.Processed)
	fmt.Fprintf(w, "%-22s %12d %12d\n", "messages lost", with.Counts.Lost(), without.Counts.Lost())
	fmt.Fprintln(w, "without the report the controller cannot tell an empty queue from a slow destination: the rate")
	fmt.Fprintln(w, "winds up toward max_rate while the queue is idle, and the next burst meets the destination at it")
}

// printProgress rewrites one terminal line with the run's state.
func printProgress(w io.Writer, p demo.Progress) {
	frac := float64(p.At) / float64(p.Duration)
	const width = 24
	n := int(frac * width)
	bar := strings.Repeat("#", n) + strings.Repeat(".", width-n)
	fmt.Fprintf(w, "\r[%s] %5.1f%%  t=%-7s setpoint %4.1f%%  cpu %5.1f%%  measured %5s  rate %6s msg/s  queued %9d  stored %10d ",
		bar, 100*frac, fmtClock(p.At), p.Setpoint, p.CPU, fmtNum(p.Measured, 1), fmtNum(p.Rate, 0), p.Queued, p.Stored)
}

func fmtClock(d time.Duration) string {
	m := int(d.Minutes())
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}

func fmtNum(v float64, prec int) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func fmtSettle(v *float64) string {
	if v == nil {
		return "never"
	}
	return fmt.Sprintf("%.0fs", *v)
}

func printDemoSummary(w io.Writer, s sim.Scenario, res demo.Result, fixed lab.Report, bound float64, wall time.Duration, plotPath string) {
	virt := s.Duration
	fmt.Fprintf(w, "Sluice demo: %v of the simulated world in %.1fs of wall time (%.0fx)\n\n", virt, wall.Seconds(), virt.Seconds()/wall.Seconds())
	fmt.Fprintf(w, "%-22s %12s %12s\n", "", "sluice", "fixed rate")
	row := func(name, a, b string) { fmt.Fprintf(w, "%-22s %12s %12s\n", name, a, b) }
	m := res.Metrics
	var f lab.Result
	if len(fixed.Results) > 0 {
		f = fixed.Results[0]
	}
	row("IAE (point-s)", fmt.Sprintf("%.0f", m.IAE), fmt.Sprintf("%.0f", f.IAE))
	row("IAE / bound", fmt.Sprintf("%.2f", m.IAE/bound), fmt.Sprintf("%.2f", f.IAERatio))
	row("start overshoot (pp)", fmt.Sprintf("%.2f", m.StartOvershoot), fmt.Sprintf("%.2f", f.StartOvershootPP))
	row("time above sp+5 (s)", fmt.Sprintf("%.0f", m.ViolationSeconds), fmt.Sprintf("%.0f", f.ViolationS))
	row("settle: start", fmtSettle(m.Settling.Start), fmtSettle(f.SettlingS.Start))
	row("settle: disturbance", fmtSettle(m.Settling.Disturbance), fmtSettle(f.SettlingS.Disturbance))
	row("settle: setpoint", fmtSettle(m.Settling.Setpoint), fmtSettle(f.SettlingS.Setpoint))
	row("max CPU (%)", fmt.Sprintf("%.1f", m.MaxCPU), fmt.Sprintf("%.1f", f.MaxCPU))
	row("messages processed", fmt.Sprintf("%d", m.Processed), fmt.Sprintf("%d", f.Processed))
	row("messages lost", fmt.Sprintf("%d", res.Counts.Lost()), fmt.Sprintf("%d", f.Lost))
	fmt.Fprintln(w)
	c := res.Counts
	fmt.Fprintf(w, "messages: produced %d = processed %d + dead-lettered %d + in flight %d + queued %d + lost %d\n",
		c.Produced, c.Processed, c.DeadLettered, c.InFlight, c.Queued, c.Lost())
	fmt.Fprintf(w, "controller ticks %d; consumer RATE reads %d (one per second, not per message); safe-rate fallbacks %d\n",
		res.Ticks, res.RateReads, res.Fallbacks)
	if plotPath != "" {
		fmt.Fprintf(w, "plot: %s\n", plotPath)
	}
	fmt.Fprintln(w, "watch the loop live and tune it in a browser: go run ./cmd/sluice dashboard --demo  (serves http://127.0.0.1:8080/)")
}

// demoFigure plots the demo run beside the fixed rate and, when there is
// one, the run with the consumers' report switched the other way.
func demoFigure(s sim.Scenario, res demo.Result, fixed lab.Report, other *demo.Result, noReport bool) plot.Figure {
	mins := func(t []float64) []float64 {
		out := make([]float64, len(t))
		for i, v := range t {
			out[i] = v / 60
		}
		return out
	}
	x := mins(res.Series.T)
	cpu := []plot.Series{
		{Name: "setpoint", X: x, Y: res.Series.Setpoint, Color: "#444444", Dashed: true},
		{Name: "sluice: true CPU", X: x, Y: res.Series.CPU, Color: "#1f77b4"},
		{Name: "sluice: measured (CloudWatch)", X: x, Y: res.Series.Measured, Color: "#17becf", Dashed: true},
	}
	rate := []plot.Series{{Name: "sluice: allowed rate", X: x, Y: res.Series.Allowed, Color: "#1f77b4"}}
	if len(fixed.Results) > 0 && len(fixed.Results[0].Series.T) > 0 {
		fs := fixed.Results[0].Series
		fx := mins(fs.T)
		cpu = append(cpu, plot.Series{Name: "fixed rate: true CPU", X: fx, Y: fs.CPU, Color: "#d62728"})
		rate = append(rate, plot.Series{Name: "fixed rate", X: fx, Y: fs.Allowed, Color: "#d62728"})
	}
	if other != nil {
		name := "sluice, report off"
		if noReport {
			name = "sluice, report on"
		}
		ox := mins(other.Series.T)
		cpu = append(cpu, plot.Series{Name: name + ": true CPU", X: ox, Y: other.Series.CPU, Color: "#ff7f0e"})
		rate = append(rate, plot.Series{Name: name + ": allowed rate", X: ox, Y: other.Series.Allowed, Color: "#ff7f0e"})
		rate = append(rate, plot.Series{Name: "sluice: processed rate", X: x, Y: res.Series.Processed, Color: "#2ca02c", Dashed: true})
	}
	return plot.Figure{
		Title:  fmt.Sprintf("sluice demo: %v, setpoint %.0f%%", s.Duration, s.Setpoint),
		XLabel: "time (min)",
		Panels: []plot.Panel{
			{Title: "CPU utilization of the destination", YLabel: "CPU %", YMin: 0, YMax: 100, Series: cpu},
			{Title: "allowed consumption rate", YLabel: "msg/s", Series: rate},
		},
	}
}
