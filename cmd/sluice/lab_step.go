package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
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
	st := stepTestFor(s, from, to, *at, flagSet(fs, "duration"))
	d, err := simulatedStepTest(s, st, *sample)
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

// simulatedStepTest runs step test st on scenario s's plant (without its
// disturbances), sampling the plant's CPU every sample with the scenario's
// noise: the metric pipeline is replaced by a fine one without publication
// delay, because the model to identify is the plant's (the pipeline's delay is
// known configuration, added before tuning: see tuning.LoopModel and
// sim.Scenario.PipelineDelay). It refuses a test that would saturate the
// plant's CPU at 0 or 100 %, which would say nothing about its dynamics.
// `lab compare` identifies its plant model through this function too.
func simulatedStepTest(s sim.Scenario, st sim.StepTest, sample time.Duration) (ident.Data, error) {
	if sample <= 0 || sample > time.Minute {
		return ident.Data{}, fmt.Errorf("sample period %v: must be positive and at most 1m", sample)
	}
	for _, u := range []float64{st.From, st.To} {
		if y := s.Plant.Output(u); y >= 100 || y <= 0 {
			return ident.Data{}, fmt.Errorf("a rate of %g msg/s would take the plant's CPU to %.4g %%: it saturates at 0 and 100 %%, so the test would say nothing about its dynamics; choose step rates within its range", u, y)
		}
	}
	s.MetricPeriod = sample
	s.MetricDelay = 0
	if s.Step == 0 || s.Step > sample {
		s.Step = min(sample, time.Second)
	}
	if s.Tick < s.Step {
		s.Tick = s.Step
	}
	d, err := sim.RunStepTest(s, st)
	if err != nil {
		return ident.Data{}, fmt.Errorf("step test: %w", err)
	}
	return d, nil
}

// stepTestFor returns the step test the flags ask for on scenario s. Without
// step flags (absent --step-from and --step-to, durationSet false) it steps from half the
// rate that holds the setpoint on the nominal plant to that rate, at the
// given time, for max(8 minutes, 20 x (tau + dead time)) after it.
func stepTestFor(s sim.Scenario, from, to optionalFloat, at time.Duration, durationSet bool) sim.StepTest {
	nominal := s.Plant.Input(s.Setpoint)
	st := sim.StepTest{From: nominal / 2, To: nominal, At: at, Duration: s.Duration}
	if from.set {
		st.From = from.v
	}
	if to.set {
		st.To = to.v
	}
	if !durationSet {
		st.Duration = at + max(8*time.Minute, 20*(s.Plant.Tau+s.Plant.DeadTime))
	}
	return st
}

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
