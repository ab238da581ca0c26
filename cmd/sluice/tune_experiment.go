package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/ident"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// tuneExperimentArg reports whether args ask for `tune --experiment`.
func tuneExperimentArg(args []string) bool { return hasBoolFlag(args, "experiment") }

// experimentReport is the JSON of `sluice tune --experiment --json`: the
// experiment's outcome and the identification from its history, as
// `tune --from-history` prints it.
type experimentReport struct {
	Experiment *loop.ExperimentState `json:"experiment"`
	historyProposal
}

// experimentEnv is what `tune --experiment` runs against: the table (or,
// in tests, the demo's store and clock).
type experimentEnv struct {
	store   paramsStore
	sleep   func(ctx context.Context, d time.Duration) error
	history func(ctx context.Context, since time.Duration) (history.File, error)
	now     func() time.Time
	// who is the identity the PARAMS edit is recorded under.
	who func(ctx context.Context) (string, error)
}

// experimentRun is one experiment asked of a loop.
type experimentRun struct {
	loopID      string
	exp         loop.Experiment
	poll, after time.Duration
	asJSON      bool
}

func runTuneExperiment(args []string, stdout, stderr io.Writer) int {
	const name = "sluice tune --experiment"
	fs := newFlagSet(name, name+" --loop ID --step POINTS --abort-above LEVEL --max-duration D [--max-rate-step R] [--id ID] [--json]",
		"Run a guarded experiment on the live loop, then identify the plant from it. The controller offsets\n"+
			"the setpoint by --step for at most --max-duration, keeps the rate within --max-rate-step of the rate\n"+
			"before it, and aborts at once (back to that rate, bumpless) at the first datapoint at or above\n"+
			"--abort-above; the loop's bounds and stale policy stay in force. The guard is in the controller\n"+
			"(PARAMS experiment): it holds if this command dies. docs/tuning.md.")
	fs.Bool("experiment", true, "run a guarded experiment (this command)")
	loopID := fs.String("loop", "", "the live loop (required)")
	table := fs.String("table", ddbstore.TableFromEnv(), "DynamoDB table (default: SLUICE_TABLE or sluice)")
	metricDelay := fs.Duration("metric-delay", 90*time.Second, "the metric's publication delay after its period ends")
	var x loop.Experiment
	fs.StringVar(&x.ID, "id", "", "the experiment's id (default: exp- and the time)")
	fs.Float64Var(&x.Step, "step", 0, "setpoint step, points (required; at most 20 either way)")
	fs.Float64Var(&x.AbortAbove, "abort-above", 0, "the signal's ceiling: the first datapoint at or above it aborts (required)")
	fs.DurationVar(&x.MaxDuration, "max-duration", 0, "the longest the step lasts (required)")
	fs.Float64Var(&x.MaxRateStep, "max-rate-step", 0, "largest change of the rate from the rate before the experiment, msg/s (0: the loop's bounds)")
	poll := fs.Duration("poll", 30*time.Second, "how often to read STATE")
	after := fs.Duration("after", 10*time.Minute, "how long to keep recording after the step ends (its return excites the plant too)")
	asJSON := fs.Bool("json", false, "print the experiment and the identification as JSON")
	if code, done := flagsOrExit(fs, args, stdout, stderr, "loop"); done {
		return code
	}
	if x.ID == "" {
		x.ID = "exp-" + time.Now().UTC().Format("20060102T150405")
	}
	ctx := context.Background()
	store, err := openDynamoStore(ctx, *table)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	env := experimentEnv{store: store, sleep: consume.WallClock{}.Sleep, now: time.Now, who: stsCaller,
		history: func(ctx context.Context, since time.Duration) (history.File, error) {
			return readTableHistory(ctx, *table, *loopID, since, *metricDelay)
		}}
	return env.run(ctx, experimentRun{loopID: *loopID, exp: x, poll: *poll, after: *after, asJSON: *asJSON}, stdout, stderr)
}

// run writes the experiment into PARAMS, waits until the controller says
// it ended, and identifies the plant from its history.
func (e experimentEnv) run(ctx context.Context, r experimentRun, stdout, stderr io.Writer) int {
	const name = "sluice tune --experiment"
	quiet := io.Discard
	if !r.asJSON {
		quiet = stdout
	}
	who, err := e.who(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	edits := []edit{{name: loop.AttrExperiment, value: r.exp.String()}}
	if code := paramsSet(ctx, e.store, r.loopID, edits, audit{who: who, at: e.now()}, false, quiet, stderr); code != 0 {
		return code
	}
	x, err := e.wait(ctx, r, quiet)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if x.Status == loop.ExperimentDone && r.after > 0 {
		if err := e.sleep(ctx, r.after); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
	}
	f, err := e.history(ctx, e.now().Sub(x.StartedAt)+10*time.Minute)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	out, fitErr := identifyAndPropose(f, pipelineOptions(f, 0, 0))
	if fitErr != nil && !errors.Is(fitErr, ident.ErrNoExcitation) {
		fmt.Fprintf(stderr, "%s: %v\n", name, fitErr)
		return 1
	}
	report := experimentReport{Experiment: x, historyProposal: out}
	return printReport(name+": no proposal", stdout, stderr, r.asJSON, report, func(w io.Writer) { printProposal(w, out) }, fitErr)
}

// wait polls STATE until the experiment ended (the controller records it),
// for at most its duration and ten polls.
func (e experimentEnv) wait(ctx context.Context, r experimentRun, w io.Writer) (*loop.ExperimentState, error) {
	deadline := e.now().Add(r.exp.MaxDuration + 10*r.poll)
	for e.now().Before(deadline) {
		if err := e.sleep(ctx, r.poll); err != nil {
			return nil, err
		}
		st, err := e.store.ReadState(ctx, r.loopID)
		if err != nil && !errors.Is(err, protocol.ErrNotFound) {
			return nil, fmt.Errorf("read STATE: %w", err)
		}
		x := st.Experiment
		if x == nil || x.ID != r.exp.ID {
			continue
		}
		if x.Status != loop.ExperimentRunning {
			fmt.Fprintf(w, "experiment %s %s at %s: %s\n", x.ID, x.Status, x.EndedAt.Format(time.RFC3339), x.Reason)
			return x, nil
		}
		fmt.Fprintf(w, "experiment %s running since %s\n", x.ID, x.StartedAt.Format(time.RFC3339))
	}
	return nil, fmt.Errorf("experiment %s: the controller did not end it within %v (is the loop running? see sluice params get)", r.exp.ID, r.exp.MaxDuration+10*r.poll)
}
