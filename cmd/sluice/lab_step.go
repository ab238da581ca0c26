package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/ident"
)

func runLabStep(args []string, stdout, stderr io.Writer) int {
	if code, handled := realPlantDispatch(args, runLabStepMariaDB, stdout, stderr); handled { // --plant mariadb: lab_mariadb.go
		return code
	}
	fs := newFlagSet("sluice lab step", "sluice lab step [scenario flags] [--step-from RATE --step-to RATE --step-at DUR] [--sample DUR] [--json] [--plot FILE] [--csv FILE]",
		"Run an open-loop step test on the simulated plant (the rate steps from --step-from to\n"+
			"--step-to at --step-at), sample its CPU every --sample with the scenario's --noise, and\n"+
			"identify a first-order-plus-dead-time model as `sluice lab identify` does. The model is\n"+
			"the plant's: the metric pipeline's delay is known configuration that tuning adds.\n"+
			"The test lasts --duration if given, otherwise --step-at + max(8m, 20 x (tau + dead time)).\n"+
			"Of the scenario flags, the test uses the plant's (--gain, --base, --tau, --dead-time),\n"+
			"--noise and --seed, and --setpoint for the default rates; the metric, tick, event and\n"+
			"producer flags do not apply to an open-loop test.\n"+
			"Durations use Go syntax: 90s, 2m.")
	sf := addScenarioFlags(fs)
	rate := func() optionalFloat { return optionalFloat{want: "a rate in messages/s, a finite number >= 0"} }
	from, to := rate(), rate()
	fs.Var(&from, "step-from", "rate before the step, messages/s (default: half the rate that holds the setpoint on the nominal plant)")
	fs.Var(&to, "step-to", "rate after the step, messages/s (default: the rate that holds the setpoint on the nominal plant)")
	at := fs.Duration("step-at", 2*time.Minute, "time of the step from the start of the test")
	sample := fs.Duration("sample", time.Second, "sampling period of the plant's CPU (fine: the plant is fast)")
	asJSON := fs.Bool("json", false, `print {"model":{"gain","tau_s","dead_time_s","base"},"rmse"} as JSON; gain in points of CPU per message/s, base and rmse in points`)
	plotPath := fs.String("plot", "", "write a plot of the test and the fitted model to this file (.svg or .png)")
	csvPath := fs.String("csv", "", "also write the step test to this CSV file (t_s,input,output), for sluice lab identify")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	s, err := sf.Scenario()
	if err != nil {
		return fail(stderr, "sluice lab step", err, 2)
	}
	if badPlotPath("sluice lab step", *plotPath, stderr) {
		return 2
	}
	st := lab.StepTestFor(s, from.ptr(), to.ptr(), *at, flagSet(fs, "duration"))
	d, err := lab.SimulatedStepTest(s, st, *sample)
	if err != nil {
		return fail(stderr, "sluice lab step", err, 2)
	}
	if *csvPath != "" {
		if err := writeStepCSV(*csvPath, d); err != nil {
			return fail(stderr, "sluice lab step", err, 1)
		}
	}
	source := fmt.Sprintf("simulated step test %g to %g msg/s at %v", st.From, st.To, st.At)
	return identifyAndReport("sluice lab step", source, d, *asJSON, *plotPath, stdout, stderr)
}

// writeStepCSV writes step test d to the CSV file path (t_s,input,output).
func writeStepCSV(path string, d ident.Data) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return ident.WriteCSV(f, d)
}
