package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/pkg/ident"
	"github.com/sluice-dev/sluice/pkg/plot"
	"github.com/sluice-dev/sluice/pkg/sim"
)

// optionalRate is a rate flag whose absence means "derive it from the
// scenario".
type optionalRate struct {
	v   float64
	set bool
}

func (f *optionalRate) String() string {
	if f == nil || !f.set {
		return ""
	}
	return strconv.FormatFloat(f.v, 'g', -1, 64)
}

func (f *optionalRate) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%q: want a rate in messages/s, a finite number >= 0", s)
	}
	f.v, f.set = v, true
	return nil
}

func runLabStep(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sluice lab step", flag.ContinueOnError)
	usageWith(fs, "sluice lab step [scenario flags] [--step-from RATE --step-to RATE --step-at DUR] [--sample DUR] [--json] [--plot FILE] [--csv FILE]",
		"Run an open-loop step test on the simulated plant (the rate steps from --step-from to\n"+
			"--step-to at --step-at), sample its CPU every --sample with the scenario's --noise, and\n"+
			"identify a first-order-plus-dead-time model as `sluice lab identify` does. The model is\n"+
			"the plant's: the metric pipeline's delay is known configuration that tuning adds.\n"+
			"The test lasts --duration if given, otherwise --step-at + max(8m, 20 x (tau + dead time)).\n"+
			"Durations use Go syntax: 90s, 2m.")
	sf := addScenarioFlags(fs)
	var from, to optionalRate
	fs.Var(&from, "step-from", "rate before the step, messages/s (default: half the rate that holds the setpoint on the nominal plant)")
	fs.Var(&to, "step-to", "rate after the step, messages/s (default: the rate that holds the setpoint on the nominal plant)")
	at := fs.Duration("step-at", 2*time.Minute, "time of the step from the start of the test")
	sample := fs.Duration("sample", time.Second, "sampling period of the plant's CPU (fine: the plant is fast)")
	asJSON := fs.Bool("json", false, `print {"model":{"gain","tau_s","dead_time_s","base"},"rmse"} as JSON; gain in points of CPU per message/s, base and rmse in points`)
	plotPath := fs.String("plot", "", "write a plot of the test and the fitted model to this file (.svg or .png)")
	csvPath := fs.String("csv", "", "also write the step test to this CSV file (t_s,input,output), for `sluice lab identify`")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	s, err := sf.Scenario()
	if err != nil {
		fmt.Fprintf(stderr, "sluice lab step: %v\n", err)
		return 2
	}
	if *plotPath != "" {
		if err := plot.CheckPath(*plotPath); err != nil {
			fmt.Fprintf(stderr, "sluice lab step: --plot: %v\n", err)
			return 2
		}
	}
	if *sample <= 0 || *sample > time.Minute {
		fmt.Fprintf(stderr, "sluice lab step: --sample %v: must be positive and at most 1m\n", *sample)
		return 2
	}
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	st := stepTestFor(s, from, to, *at, durationSet)
	// Sample the plant finely: a pipeline with the sample as its period and
	// no publication delay.
	s.MetricPeriod = *sample
	s.MetricDelay = 0
	if s.Step == 0 || s.Step > *sample {
		s.Step = min(*sample, time.Second)
	}
	if s.Tick < s.Step {
		s.Tick = s.Step
	}
	d, err := sim.RunStepTest(s, st)
	if err != nil {
		fmt.Fprintf(stderr, "sluice lab step: %v\n", err)
		return 2
	}
	for _, y := range d.Y {
		if y >= 100 || y <= 0 {
			fmt.Fprintf(stderr, "sluice lab step: the plant's CPU reached %v %% during the test: it saturated, so the test says nothing about its dynamics; choose --step-from/--step-to within its range\n", y)
			return 2
		}
	}
	if *csvPath != "" {
		if err := writeStepCSV(*csvPath, d); err != nil {
			fmt.Fprintf(stderr, "sluice lab step: %v\n", err)
			return 1
		}
	}
	source := fmt.Sprintf("simulated step test %g to %g msg/s at %v", st.From, st.To, st.At)
	return identifyAndReport("sluice lab step", source, d, *asJSON, *plotPath, stdout, stderr)
}

// stepTestFor returns the step test the flags ask for on scenario s.
func stepTestFor(s sim.Scenario, from, to optionalRate, at time.Duration, durationSet bool) sim.StepTest {
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
