package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/internal/replay"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/ident"
	"github.com/sluice-dev/sluice/pkg/loop"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// tuneShadowArg reports whether args ask for `tune --shadow-report`.
func tuneShadowArg(args []string) bool { return hasBoolFlag(args, "shadow-report") }

// shadowReport is the JSON contract of `sluice tune --shadow-report --json`.
type shadowReport struct {
	Loop         string            `json:"loop"`
	Shadow       string            `json:"shadow"`
	Ticks        int               `json:"ticks"`
	Model        historyModel      `json:"model"`
	Confidence   historyConfidence `json:"confidence"`
	ExcitationOK bool              `json:"excitation_ok"`
	Reason       string            `json:"reason,omitempty"`
	// The replay (absent when the history cannot identify the plant).
	Fit           *replay.Fit `json:"fit,omitempty"`
	Live          *replay.Run `json:"live,omitempty"`
	ShadowRun     *replay.Run `json:"shadow_run,omitempty"`
	IAERatio      *float64    `json:"iae_ratio,omitempty"`
	RateTVRatio   *float64    `json:"rate_tv_ratio,omitempty"`
	Verdict       string      `json:"verdict"`
	VerdictReason string      `json:"verdict_reason"`
}

// shadowFlags are the flags of `tune --shadow-report`: the live loop's
// history (as --from-history's) and the shadow's gains.
type shadowFlags struct {
	historyFlags
	shadowFile, liveParams, shadowParams, shadow *string
	asJSON                                       *bool
}

func newShadowFlags(fs *flag.FlagSet) shadowFlags {
	fs.Bool("shadow-report", true, "compare the shadow's gains with the live gains (this command)")
	return shadowFlags{
		historyFlags: addHistoryFlags(fs, "the live loop's history as JSON (`sluice demo --history-out`; its params are the live gains)",
			"the live loop: read its HIST items and PARAMS from the table"),
		shadowFile:   fs.String("shadow-file", "", "with --history-file: the shadow loop's history file, for its params"),
		liveParams:   fs.String("live-params", "", "with --history-file: PARAMS edits (name=value ...) over the file's params for the live gains"),
		shadowParams: fs.String("shadow-params", "", "PARAMS edits (name=value ..., as `tune --from-history` prints them) over the live params for the shadow"),
		shadow:       fs.String("shadow", "", "with --loop: the shadow loop whose PARAMS hold the proposal"),
		asJSON:       fs.Bool("json", false, "print the report as JSON"),
	}
}

// runTuneShadow is `sluice tune --shadow-report`: replay the live and the
// shadow gains on the model identified from the live loop's history, with
// the disturbance the live loop saw, and say whether to promote.
func runTuneShadow(args []string, stdout, stderr io.Writer) int {
	const name = "sluice tune --shadow-report"
	fs := newFlagSet(name, name+" (--loop LIVE --shadow SHADOW | --history-file FILE (--shadow-file FILE | --shadow-params 'k=v ...')) [--since D] [--json]",
		"How the shadow's gains would have done against the live gains on the same data. A shadow sees\n"+
			"the live loop's datapoints, not those its own rate would have caused, so the comparison is a\n"+
			"counterfactual replay: the plant identified from the live history (as --from-history), the\n"+
			"disturbance the live loop saw (measured - model), both gain sets in closed loop on that model\n"+
			"with that disturbance and setpoint trajectory. The live replay's fit to the record checks it.\n"+
			"Refuses, with the reason, when the history cannot identify the plant. docs/tuning.md.")
	fl := newShadowFlags(fs)
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	f, live, shadow, shadowID, err := fl.read(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	rep, err := shadowCompare(f, fl.options(f), live, shadow)
	rep.Shadow = shadowID
	if err != nil && !errors.Is(err, ident.ErrNoExcitation) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return printReport(name+": no comparison", stdout, stderr, *fl.asJSON, rep, func(w io.Writer) { printShadowReport(w, rep) }, err)
}

// read returns the live history and the two gain sets the flags name.
func (fl shadowFlags) read(ctx context.Context) (f history.File, live, shadow loop.Params, shadowID string, err error) {
	if err = fl.check(); err != nil {
		return f, live, shadow, "", err
	}
	switch {
	case *fl.loopID != "" && *fl.shadow == "":
		return f, live, shadow, "", errors.New("--loop needs --shadow SHADOW (the shadow loop's id)")
	case *fl.file != "" && (*fl.shadowFile == "") == (*fl.shadowParams == ""):
		return f, live, shadow, "", errors.New("--history-file needs one of --shadow-file FILE and --shadow-params 'name=value ...'")
	}
	var shadowAttrs map[string]any
	f, err = fl.historyFlags.read(ctx)
	switch {
	case err != nil:
	case *fl.loopID != "":
		shadowAttrs, err = readLoopParams(ctx, *fl.table, *fl.shadow)
		shadowID = *fl.shadow
	case *fl.shadowFile != "":
		var sf history.File
		sf, err = history.ReadFile(*fl.shadowFile, 0)
		shadowAttrs, shadowID = sf.Params, sf.Loop
	}
	if err != nil {
		return f, live, shadow, "", err
	}
	liveAttrs, err := withEdits(f.Params, *fl.liveParams)
	if err != nil {
		return f, live, shadow, "", fmt.Errorf("--live-params: %w", err)
	}
	if shadowAttrs == nil {
		shadowAttrs, shadowID = liveAttrs, f.Loop+" with --shadow-params"
	}
	if shadowAttrs, err = withEdits(shadowAttrs, *fl.shadowParams); err != nil {
		return f, live, shadow, "", fmt.Errorf("--shadow-params: %w", err)
	}
	if live, err = decodeGains(f.Loop, liveAttrs); err != nil {
		return f, live, shadow, "", fmt.Errorf("live loop: %w", err)
	}
	shadow, err = decodeGains(shadowID, shadowAttrs)
	return f, live, shadow, shadowID, err
}

// readLoopParams reads a loop's PARAMS attributes from the table.
func readLoopParams(ctx context.Context, table, loopID string) (map[string]any, error) {
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return nil, err
	}
	attrs, err := ddbloop.New(dynamodb.NewFromConfig(cfg), table).ReadParams(ctx, loopID)
	if err != nil {
		return nil, fmt.Errorf("loop %s: read PARAMS: %w", loopID, err)
	}
	return attrs, nil
}

// withEdits returns attrs with the space-separated name=value edits of
// text applied (name= removes).
func withEdits(attrs map[string]any, text string) (map[string]any, error) {
	out := make(map[string]any, len(attrs))
	for k, v := range attrs {
		out[k] = v
	}
	edits, err := parseEdits(strings.Fields(text))
	if err != nil {
		return nil, err
	}
	for _, e := range edits {
		if e.remove {
			delete(out, e.name)
		} else {
			out[e.name] = e.value
		}
	}
	return out, nil
}

// decodeGains decodes PARAMS attributes; a shadow's mode counts as auto.
func decodeGains(loopID string, attrs map[string]any) (loop.Params, error) {
	if len(attrs) == 0 {
		return loop.Params{}, fmt.Errorf("loop %s: no PARAMS (a history file from `sluice demo --history-out` carries them; else give --live-params)", loopID)
	}
	a := make(map[string]any, len(attrs))
	for k, v := range attrs {
		a[k] = v
	}
	a[loop.AttrMode] = string(loop.ModeAuto)
	return loop.DecodeParams(loopID, a, metricsources.All())
}

// shadowCompare identifies the plant from the live history and replays
// both gain sets on it. The error wraps ident.ErrNoExcitation when the
// history cannot identify the plant.
func shadowCompare(f history.File, opt ident.ClosedLoopOptions, live, shadow loop.Params) (shadowReport, error) {
	h, input := identHistory(f.Points)
	res, err := ident.FitClosedLoop(h, opt)
	if err != nil && !errors.Is(err, ident.ErrNoExcitation) {
		return shadowReport{Loop: f.Loop}, err
	}
	p := proposalOf(f.Loop, res, opt, input)
	rep := shadowReport{Loop: f.Loop, Ticks: len(f.Points), Model: p.Model, Confidence: p.Confidence,
		ExcitationOK: p.ExcitationOK, Reason: p.Reason, Verdict: "keep"}
	if err != nil {
		rep.VerdictReason = "the history cannot identify the plant: " + p.Reason
		return rep, err
	}
	plant := replay.Plant{Model: res.Model, MetricPeriod: opt.MetricPeriod, PipelineDelay: opt.PipelineDelay}
	r, err := replay.Compare(traceOf(f.Points), plant, live.ControlConfig(), shadow.ControlConfig())
	if err != nil {
		return rep, err
	}
	rep.Fit, rep.Live, rep.ShadowRun = &r.Fit, &r.Live, &r.Shadow
	rep.IAERatio, rep.RateTVRatio = &r.IAERatio, &r.RateTVRatio
	rep.Verdict, rep.VerdictReason = r.Verdict, r.Reason
	return rep, nil
}

// traceOf is the replay's record of history points.
func traceOf(pts []history.Point) replay.Trace {
	var tr replay.Trace
	for _, p := range pts {
		y := p.Measured
		if p.Stale {
			y = math.NaN()
		}
		tr.T = append(tr.T, p.T.Sub(pts[0].T).Seconds())
		tr.Setpoint = append(tr.Setpoint, p.Setpoint)
		tr.Measured = append(tr.Measured, y)
		tr.Rate = append(tr.Rate, p.Rate)
		tr.Consumed = append(tr.Consumed, p.Consumed)
	}
	return tr
}

// printShadowReport prints the comparison.
func printShadowReport(w io.Writer, r shadowReport) {
	m, c := r.Model, r.Confidence
	fmt.Fprintf(w, "loop %s against shadow %s: %d ticks\n", r.Loop, r.Shadow, r.Ticks)
	fmt.Fprintf(w, "model: gain %.4g ± %.2g points per msg/s, base %.2f %%, tau %.0f s, dead time %.0f s (lag + dead time %.0f to %.0f s), rmse %.2f\n",
		m.Gain, c.GainSE, m.Base, m.TauS, m.DeadTimeS, c.LagDeadTimeS[0], c.LagDeadTimeS[1], m.RMSE)
	if r.Fit == nil {
		fmt.Fprintf(w, "verdict: %s: %s\n", r.Verdict, r.VerdictReason)
		return
	}
	fmt.Fprintf(w, "replay of the live gains against the record: fit %.1f %% (measured), %.1f %% (rate)\n", r.Fit.Measured, r.Fit.Rate)
	fmt.Fprintf(w, "%-8s %12s %14s %16s\n", "", "IAE (pt-s)", "overshoot (pt)", "rate changes")
	fmt.Fprintf(w, "%-8s %12.0f %14.2f %16.0f\n", "live", r.Live.IAE, r.Live.Overshoot, r.Live.RateTV)
	fmt.Fprintf(w, "%-8s %12.0f %14.2f %16.0f\n", "shadow", r.ShadowRun.IAE, r.ShadowRun.Overshoot, r.ShadowRun.RateTV)
	fmt.Fprintf(w, "shadow / live: IAE %.3f, rate changes %.3f\n", *r.IAERatio, *r.RateTVRatio)
	fmt.Fprintf(w, "verdict: %s: %s\n", r.Verdict, r.VerdictReason)
}
