package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// flagsOrExit parses args into fs. It returns done=true with the exit code
// when the command must stop: 0 after -h (usage on stdout), 2 after a bad
// flag (the flag package's message and the usage on stderr) or when a flag
// named in required is empty.
func flagsOrExit(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, required ...string) (code int, done bool) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(buf.Bytes())
		return 0, true
	case err != nil:
		_, _ = stderr.Write(buf.Bytes())
		return 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q (flags only; see -h)\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			fmt.Fprintf(stderr, "%s: --%s is required\n", fs.Name(), name)
			return 2, true
		}
	}
	fs.SetOutput(stderr)
	return 0, false
}

// newFlagSet is command name's flag set, whose usage is the synopsis and
// description followed by the flags.
func newFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", synopsis, description)
		fs.PrintDefaults()
	}
	return fs
}

// badModelFlags says what is wrong with the model flags of `sluice tune`
// (--gain, --tau, --dead-time, --extra-delay, --tauc), "" when nothing is.
func badModelFlags(gain float64, tau, dead, extra, tauc time.Duration) string {
	switch {
	case gain == 0:
		return "--gain is required: points of CPU per message/s, e.g. 0.05"
	case math.IsNaN(gain) || math.IsInf(gain, 0) || gain < 0:
		return fmt.Sprintf("--gain %v: must be a positive number of points of CPU per message/s", gain)
	case tau < 0 || dead < 0 || extra < 0 || tauc < 0:
		return "--tau, --dead-time, --extra-delay and --tauc must not be negative"
	}
	return ""
}

// runTune is `sluice tune`: gains from a plant model, or from a running
// loop (--from-history, --experiment, --shadow-report).
func runTune(args []string, stdout, stderr io.Writer) int {
	if tuneExperimentArg(args) { // tune_experiment.go
		return runTuneExperiment(args, stdout, stderr)
	}
	if tuneShadowArg(args) { // tune_shadow.go
		return runTuneShadow(args, stdout, stderr)
	}
	if tuneFromHistoryArg(args) { // tune_history.go
		return runTuneFromHistory(args, stdout, stderr)
	}
	fs := newFlagSet("sluice tune", "sluice tune --gain K --tau T --dead-time D [--rule simc|imc|zn|cc] [--form pi|pid] [--tauc X] [--extra-delay E] [--json]",
		"Compute PI or PID gains from a first-order-plus-dead-time model of the plant.\n"+
			"kp is in messages/s per point of CPU, ki in messages/s per point-second (kp/Ti),\n"+
			"kd in messages per point (kp*Td). Durations use Go syntax: 90s, 2m, 1m30s.\n"+
			"From a running loop instead: --from-history (identify from its history), --experiment (a guarded\n"+
			"setpoint step, then identify), --shadow-report (replay a shadow's gains against the live ones); -h each.")
	gain := fs.Float64("gain", 0, "plant gain, points of CPU per message/s (required, > 0)")
	tau := fs.Duration("tau", 0, "plant time constant (e.g. 15s)")
	dead := fs.Duration("dead-time", 0, "plant dead time (e.g. 5s)")
	extra := fs.Duration("extra-delay", 0, "delay the measurement and sampling add to the dead time:\nmetric period/2 + publication delay + tick/2 (e.g. 150s for CloudWatch 60s averages published 90s late, 60s tick)")
	ruleName := fs.String("rule", string(tuning.SIMC), "tuning rule: simc (Skogestad 2003), imc (lambda), zn (Ziegler-Nichols reaction curve), cc (Cohen-Coon)")
	formName := fs.String("form", string(tuning.PI), "controller form: pi or pid")
	tauc := fs.Duration("tauc", 0, "desired closed-loop time constant for simc and imc; 0 means the rule's default (simc: the dead time)")
	asJSON := fs.Bool("json", false, `print {"rule","form","kp","ki","kd","ti_s","td_s"} as JSON`)
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	rule, err := tuning.ParseRule(*ruleName)
	if err != nil {
		fmt.Fprintf(stderr, "sluice tune: --rule: %v\n", err)
		return 2
	}
	form, err := tuning.ParseForm(*formName)
	if err != nil {
		fmt.Fprintf(stderr, "sluice tune: --form: %v\n", err)
		return 2
	}
	if msg := badModelFlags(*gain, *tau, *dead, *extra, *tauc); msg != "" {
		fmt.Fprintln(stderr, "sluice tune: "+msg)
		return 2
	}
	m := tuning.LoopModel(control.FOPDT{Gain: *gain, Tau: *tau, DeadTime: *dead}, *extra)
	g, err := tuning.Tune(m, rule, tuning.Options{Form: form, TauC: *tauc})
	if err != nil {
		fmt.Fprintf(stderr, "sluice tune: %v\n", err)
		return 2
	}
	if *asJSON {
		return printJSON(stdout, stderr, g) // tuning.Gains writes the contract's fields
	}
	fmt.Fprintf(stdout, "rule %s (%s) for gain %g points per msg/s, tau %v, dead time %v:\n", g.Rule, g.Form, m.Gain, m.Tau, m.DeadTime)
	fmt.Fprintf(stdout, "  kp = %.6g msg/s per point\n  ki = %.6g msg/s per point-second (Ti = %v)\n  kd = %.6g msg per point (Td = %v)\n",
		g.Kp, g.Ki, g.Ti.Round(time.Millisecond), g.Kd, g.Td.Round(time.Millisecond))
	return 0
}

// printJSON writes v as indented JSON and returns the exit code.
func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "sluice: write JSON: %v\n", err)
		return 1
	}
	return 0
}
