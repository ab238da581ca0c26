package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/ident"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// tuneFromHistoryArg reports whether args ask for `tune --from-history`.
func tuneFromHistoryArg(args []string) bool { return hasBoolFlag(args, "from-history") }

// hasBoolFlag reports whether args set the boolean flag name.
func hasBoolFlag(args []string, name string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		return a == name || a == name+"=true"
	})
}

// historyProposal is the JSON contract of `sluice tune --from-history --json`.
type historyProposal struct {
	Loop         string                  `json:"loop"`
	Model        historyModel            `json:"model"`
	Confidence   historyConfidence       `json:"confidence"`
	Disturbances []ident.StepDisturbance `json:"disturbances"`
	ExcitationOK bool                    `json:"excitation_ok"`
	Reason       string                  `json:"reason,omitempty"`
	Input        string                  `json:"input"`
	// Kp and Ki are the proposal (absent when the history was refused);
	// Params the PARAMS attributes that carry it.
	Kp     *float64       `json:"kp,omitempty"`
	Ki     *float64       `json:"ki,omitempty"`
	Params map[string]any `json:"params,omitempty"`
}

// historyModel is the identified model as `lab identify` shows it.
type historyModel struct {
	Gain      float64 `json:"gain"`
	TauS      float64 `json:"tau_s"`
	DeadTimeS float64 `json:"dead_time_s"`
	Base      float64 `json:"base"`
	RMSE      float64 `json:"rmse"`
}

// historyConfidence are the fit's confidence figures.
type historyConfidence struct {
	GainSE         float64    `json:"gain_se"`
	BaseSE         float64    `json:"base_se"`
	LagDeadTimeS   [2]float64 `json:"lag_plus_dead_time_s"`
	Samples        int        `json:"samples"`
	InputRange     float64    `json:"input_range"`
	PipelineDelayS float64    `json:"pipeline_delay_s"`
	MetricPeriodS  float64    `json:"metric_period_s"`
}

// runTuneFromHistory is `sluice tune --from-history`: identify the plant
// from the loop's closed-loop history and propose the product controller's
// parameters.
func runTuneFromHistory(args []string, stdout, stderr io.Writer) int {
	const name = "sluice tune --from-history"
	fs := newFlagSet(name, name+" (--history-file FILE | --loop ID [--table T] [--metric-delay D]) [--since D] [--metric-period P] [--pipeline-delay L] [--json]",
		"Identify the plant in closed loop from the loop's history (one point per tick: the processed\n"+
			"rate as the input, the measured signal as the output, the metric pipeline's delay known),\n"+
			"report the model with its confidence, and propose the product controller's parameters\n"+
			"(pkg/tuning: SIMC's kp on the loop model, the delay-aware ki, the feedforward on the model).\n"+
			"Refuses, with the reason, when the history holds too little excitation. docs/tuning.md.")
	fs.Bool("from-history", true, "identify from the loop's history (this command)")
	hf := addHistoryFlags(fs, "the history as JSON (`sluice demo --history-out` writes it; an array of points works too)",
		"read the loop's HIST items and PARAMS from the table instead of a file")
	asJSON := fs.Bool("json", false, "print the model, confidence, excitation_ok, kp, ki and params as JSON")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	if err := hf.check(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	f, err := hf.read(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	out, fitErr := identifyAndPropose(f, hf.options(f))
	if fitErr != nil && !errors.Is(fitErr, ident.ErrNoExcitation) {
		fmt.Fprintf(stderr, "%s: %v\n", name, fitErr)
		return 1
	}
	return printReport(name+": no proposal", stdout, stderr, *asJSON, out, func(w io.Writer) { printProposal(w, out) }, fitErr)
}

// printReport prints a report as JSON (asJSON) or as text, then, when the
// history was refused, why (prefix: the command and what it does not give)
// with exit status 1.
func printReport(prefix string, stdout, stderr io.Writer, asJSON bool, v any, text func(io.Writer), refused error) int {
	if asJSON {
		if code := printJSON(stdout, stderr, v); code != 0 {
			return code
		}
	} else {
		text(stdout)
	}
	if refused != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prefix, refused)
		return 1
	}
	return 0
}

// identifyAndPropose fits the history and, when it identifies the plant,
// adds the proposal. The error wraps ident.ErrNoExcitation when the
// history was refused (the report then holds the reason and the figures).
func identifyAndPropose(f history.File, opt ident.ClosedLoopOptions) (historyProposal, error) {
	h, input := identHistory(f.Points)
	res, err := ident.FitClosedLoop(h, opt)
	if err != nil && !errors.Is(err, ident.ErrNoExcitation) {
		return historyProposal{}, err
	}
	out := proposalOf(f.Loop, res, opt, input)
	if err != nil {
		return out, err
	}
	return out, propose(&out, res, opt)
}

// pipelineOptions are the measurement's timing: the flags, else the file's,
// else CloudWatch's defaults (60 s periods published 90 s late, 60 s tick).
func pipelineOptions(f history.File, period, delay time.Duration) ident.ClosedLoopOptions {
	opt := ident.ClosedLoopOptions{MetricPeriod: period, PipelineDelay: delay}
	if opt.MetricPeriod == 0 {
		opt.MetricPeriod = time.Minute
		if f.MetricPeriodS > 0 {
			opt.MetricPeriod = time.Duration(f.MetricPeriodS * float64(time.Second))
		}
	}
	if opt.PipelineDelay == 0 {
		opt.PipelineDelay = 150 * time.Second
		if f.PipelineDelayS > 0 {
			opt.PipelineDelay = time.Duration(f.PipelineDelayS * float64(time.Second))
		}
	}
	return opt
}

// identHistory turns history points into the fit's samples: time since the
// first point, the consumed rate as the input (the raw rate since the
// previous tick: the controller's average undone, history.RawConsumed; the
// allowed rate of the tick before when the consumers' report is missing:
// input "allowed"), the measured signal as the output (NaN while stale).
func identHistory(pts []history.Point) (ident.History, string) {
	var h ident.History
	pts = history.RawConsumed(pts)
	input := "processed"
	for i, p := range pts {
		u := p.Consumed
		if math.IsNaN(u) && i > 0 {
			u, input = pts[i-1].Rate, "allowed"
		}
		y := p.Measured
		if p.Stale {
			y = math.NaN()
		}
		h.T = append(h.T, p.T.Sub(pts[0].T).Seconds())
		h.U = append(h.U, u)
		h.Y = append(h.Y, y)
	}
	return h, input
}

// proposalOf is the report of a fit, without the proposal.
func proposalOf(loopID string, res ident.ClosedLoopResult, opt ident.ClosedLoopOptions, input string) historyProposal {
	m := res.Model
	return historyProposal{
		Loop:  loopID,
		Model: historyModel{Gain: m.Gain, TauS: m.Tau.Seconds(), DeadTimeS: m.DeadTime.Seconds(), Base: m.Base, RMSE: res.RMSE},
		Confidence: historyConfidence{GainSE: res.GainSE, BaseSE: res.BaseSE,
			LagDeadTimeS: [2]float64{res.LagDeadTime[0].Seconds(), res.LagDeadTime[1].Seconds()},
			Samples:      res.Samples, InputRange: res.Excitation.InputRange,
			PipelineDelayS: opt.PipelineDelay.Seconds(), MetricPeriodS: opt.MetricPeriod.Seconds()},
		Disturbances: append([]ident.StepDisturbance{}, res.Disturbances...),
		ExcitationOK: res.Excitation.OK, Reason: res.Excitation.Reason, Input: input,
	}
}

// propose adds the product controller's parameters for the model.
func propose(out *historyProposal, res ident.ClosedLoopResult, opt ident.ClosedLoopOptions) error {
	modelErr := math.NaN() // the residual over the response the input explains
	if resp := res.Model.Gain * res.Excitation.InputRange; resp > 0 {
		modelErr = res.RMSE / resp
	}
	p, err := tuning.TuneProduct(res.Model, opt.PipelineDelay, res.RMSE, modelErr)
	if err != nil {
		return fmt.Errorf("propose gains: %w", err)
	}
	out.Kp, out.Ki = &p.Kp, &p.Ki
	ff := p.Feedforward
	out.Params = map[string]any{
		"kp": p.Kp, "ki": p.Ki, "anti_windup": "conditional", "delay_aware": true,
		"setpoint_filter": p.SetpointFilter.Round(time.Second).String(), "noise_band": p.NoiseBand,
		"ff_gain": ff.Gain, "ff_base": ff.Base, "ff_tau": ff.Tau.Round(time.Second).String(), "ff_dead_time": ff.DeadTime.Round(time.Second).String(),
	}
	return nil
}

// printProposal prints the model, its confidence and the proposal.
func printProposal(w io.Writer, p historyProposal) {
	m, c := p.Model, p.Confidence
	fmt.Fprintf(w, "loop %s: %d samples, input: the %s rate, pipeline delay %.0f s, metric period %.0f s\n",
		p.Loop, c.Samples, p.Input, c.PipelineDelayS, c.MetricPeriodS)
	fmt.Fprintf(w, "model: gain %.4g ± %.2g points per msg/s, base %.2f ± %.2f %%, tau %.0f s, dead time %.0f s (lag + dead time %.0f to %.0f s), rmse %.2f\n",
		m.Gain, c.GainSE, m.Base, c.BaseSE, m.TauS, m.DeadTimeS, c.LagDeadTimeS[0], c.LagDeadTimeS[1], m.RMSE)
	for _, d := range p.Disturbances {
		fmt.Fprintf(w, "unmeasured load: %+.1f points from %.0f s to %.0f s\n", d.Size, d.FromS, d.ToS)
	}
	if !p.ExcitationOK {
		fmt.Fprintf(w, "excitation: not enough: %s\n", p.Reason)
		return
	}
	fmt.Fprintf(w, "excitation: ok (the processed rate spanned %.0f msg/s)\n", c.InputRange)
	fmt.Fprintf(w, "proposal (the product controller, pkg/tuning): kp %.4g msg/s per point, ki %.4g msg/s per point-second\n", *p.Kp, *p.Ki)
	fmt.Fprintf(w, "PARAMS: kp=%.4g ki=%.4g ff_gain=%.4g ff_base=%.2f ff_tau=%v ff_dead_time=%v setpoint_filter=%v noise_band=%.2f delay_aware=true anti_windup=conditional\n",
		*p.Kp, *p.Ki, p.Params["ff_gain"], p.Params["ff_base"], p.Params["ff_tau"], p.Params["ff_dead_time"], p.Params["setpoint_filter"], p.Params["noise_band"])
}
