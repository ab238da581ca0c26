package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// demoExperiment is a demo run (the production tick and consumers on the
// simulated plant) during which an operator asks for an experiment.
type demoExperiment struct {
	s      sim.Scenario
	params loop.Params
	rec    *historyRecorder
	states []loop.State // STATE after each tick
	sm     *demo.Sim
}

// startDemo starts the demo on s (a slew limit of 150 msg/s per tick),
// recording the history and STATE of every tick; Close the Sim.
func startDemo(t *testing.T, s sim.Scenario) *demoExperiment {
	t.Helper()
	ctrl, _, err := demo.Tune(s)
	if err != nil {
		t.Fatal(err)
	}
	r := &demoExperiment{s: s, params: demo.DefaultParams(s, ctrl), rec: newHistoryRecorder(s)}
	r.params.SlewLimit = 150
	cfg := demo.Config{Scenario: s, Params: r.params, NoSeries: true}
	cfg.OnTick = func(tk demo.Tick) {
		r.rec.record(tk)
		st, err := r.sm.Store().ReadState(context.Background(), demo.LoopID)
		if err != nil {
			t.Error(err)
		}
		r.states = append(r.states, st.Clone())
	}
	if r.sm, err = demo.Start(cfg); err != nil {
		t.Fatal(err)
	}
	return r
}

// runExperiment runs s, writes the experiment attribute at `at` and runs
// until `until`. It skips the test in -short mode.
func runExperiment(t *testing.T, s sim.Scenario, exp string, at, until time.Duration) *demoExperiment {
	t.Helper()
	if testing.Short() {
		t.Skipf("runs the demo for %.0f minutes of simulated time", until.Minutes())
	}
	r := startDemo(t, s)
	defer r.sm.Close()
	ctx := context.Background()
	if err := r.sm.Advance(ctx, at); err != nil {
		t.Fatal(err)
	}
	attrs, err := r.sm.Store().ReadParams(ctx, demo.LoopID)
	if err != nil {
		t.Fatal(err)
	}
	attrs[loop.AttrExperiment] = exp
	if err := r.sm.Store().WriteParams(ctx, demo.LoopID, attrs); err != nil {
		t.Fatal(err)
	}
	if err := r.sm.Advance(ctx, until-at); err != nil {
		t.Fatal(err)
	}
	return r
}

// running returns the indexes of the ticks at which the experiment ran,
// and the tick at which it ended (-1 when it did not).
func (r *demoExperiment) running() (ticks []int, end int) {
	end = -1
	for i, st := range r.states {
		x := st.Experiment
		switch {
		case x == nil:
		case x.Status == loop.ExperimentRunning:
			ticks = append(ticks, i)
		case end < 0:
			end = i
		}
	}
	return ticks, end
}

func (r *demoExperiment) checkBounds(t *testing.T) {
	t.Helper()
	for i, p := range r.rec.file.Points {
		if p.Rate < r.params.MinRate || p.Rate > r.params.MaxRate {
			t.Errorf("tick %d: rate %.1f outside the loop's bounds [%v, %v]", i, p.Rate, r.params.MinRate, r.params.MaxRate)
		}
	}
}

func experimentScenario() sim.Scenario {
	s := sim.Reference()
	s.Noise, s.Setpoint = 1, 50
	s.SetpointChanges, s.Disturbances = nil, nil
	return s
}

func TestExperimentRunsWithinLimitsAndIdentifies(t *testing.T) {
	s := experimentScenario()
	r := runExperiment(t, s, "id=e1,step=10,abort_above=70,max_duration=20m", 10*time.Minute, 45*time.Minute)
	ticks, end := r.running()
	if len(ticks) < 18 || end < 0 || r.states[end].Experiment.Status != loop.ExperimentDone {
		t.Fatalf("experiment ran %d ticks, ended at tick %d (%+v); want about 20, done", len(ticks), end, r.states[len(r.states)-1].Experiment)
	}
	pts := r.rec.file.Points
	highest := math.Inf(-1)
	if sp := pts[ticks[0]].Setpoint; sp != s.Setpoint+10 {
		t.Errorf("history setpoint while the experiment ran %v; want the setpoint in force %v", sp, s.Setpoint+10)
	}
	for _, i := range ticks {
		highest = math.Max(highest, pts[i].Measured)
		if pts[i].Measured >= 70 {
			t.Errorf("tick %d: datapoint %.2f at or above the ceiling 70 while the experiment ran", i, pts[i].Measured)
		}
	}
	r.checkBounds(t)
	x := r.states[end].Experiment
	f := r.rec.file
	f.Points = window(pts, x.StartedAt.Add(-10*time.Minute), x.EndedAt.Add(15*time.Minute))
	out, err := identifyAndPropose(f, pipelineOptions(f, 0, 0))
	if err != nil {
		t.Fatalf("identify from the experiment: %v", err)
	}
	if g := out.Model.Gain; math.Abs(g/s.Plant.Gain-1) > 0.15 {
		t.Errorf("gain from the experiment %.4f; want %.4f within 15 %%", g, s.Plant.Gain)
	}
	t.Logf("experiment %s: %d ticks, highest datapoint %.2f; model gain %.4f (true %.4f), base %.2f (true %.0f), kp %.4g ki %.4g",
		x.ID, len(ticks), highest, out.Model.Gain, s.Plant.Gain, out.Model.Base, s.Plant.Base, *out.Kp, *out.Ki)
}

func TestExperimentAbortIsBumpless(t *testing.T) {
	s := experimentScenario()
	s.Disturbances = []sim.Disturbance{{At: 15 * time.Minute, Duration: 20 * time.Minute, Size: 15}}
	r := runExperiment(t, s, "id=e2,step=10,abort_above=68,max_duration=30m", 10*time.Minute, 30*time.Minute)
	ticks, end := r.running()
	if end < 0 || r.states[end].Experiment.Status != loop.ExperimentAborted {
		t.Fatalf("experiment ended at tick %d (%+v); want aborted by the load", end, r.states[len(r.states)-1].Experiment)
	}
	pts := r.rec.file.Points
	for _, i := range ticks {
		if pts[i].Measured >= 68 {
			t.Errorf("tick %d: datapoint %.2f at or above the ceiling 68 while the experiment ran", i, pts[i].Measured)
		}
	}
	x := r.states[end].Experiment
	if got := pts[end].Rate; got > x.Rate+1e-9 || got < x.Rate-r.params.SlewLimit && got < pts[end-1].Rate-r.params.SlewLimit {
		t.Errorf("abort at tick %d: rate %.1f (before %.1f); want the pre-experiment rate %.1f", end, got, pts[end-1].Rate, x.Rate)
	}
	// Then continuous: the controller tracked the abort's rate, so it
	// carries on from there; the slew limit bounds every increase (a cut
	// is always allowed: the controller answers the load's datapoints).
	for i := end + 1; i < len(pts); i++ {
		if d := pts[i].Rate - pts[i-1].Rate; d > r.params.SlewLimit+1e-9 {
			t.Errorf("tick %d after the abort: the rate jumps up by %.1f (slew limit %v)", i, d, r.params.SlewLimit)
		}
	}
	if next := pts[end+1].Rate; next > pts[end].Rate+1e-9 && pts[end+1].Measured > s.Setpoint {
		t.Errorf("tick after the abort: rate %.1f above the abort's %.1f with the signal %.1f above its setpoint", next, pts[end].Rate, pts[end+1].Measured)
	}
	r.checkBounds(t)
	t.Logf("aborted at tick %d (%s): rate %.1f -> %.1f (pre-experiment %.1f), next %.1f", end, x.Reason, pts[end-1].Rate, pts[end].Rate, x.Rate, pts[end+1].Rate)
}

// window keeps the points from `from` to `to`.
func window(pts []history.Point, from, to time.Time) []history.Point {
	var out []history.Point
	for _, p := range pts {
		if !p.T.Before(from) && !p.T.After(to) {
			out = append(out, p)
		}
	}
	return out
}

// The command writes the attribute, waits for the controller to end the
// experiment, and identifies the plant from its history.
func TestTuneExperimentCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for 35 minutes of simulated time")
	}
	s := experimentScenario()
	r := startDemo(t, s)
	defer r.sm.Close()
	ctx := context.Background()
	if err := r.sm.Advance(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	env := experimentEnv{store: r.sm.Store(), now: r.sm.Now, who: testOperator,
		sleep: func(ctx context.Context, d time.Duration) error { return r.sm.Advance(ctx, d) },
		history: func(_ context.Context, since time.Duration) (history.File, error) {
			f := r.rec.file
			f.Points = history.KeepSince(f.Points, since)
			return f, nil
		}}
	x := loop.Experiment{ID: "cli", Step: 10, AbortAbove: 70, MaxDuration: 20 * time.Minute}
	var out, errb bytes.Buffer
	code := env.run(ctx, experimentRun{loopID: demo.LoopID, exp: x, poll: time.Minute, after: 5 * time.Minute, asJSON: true}, &out, &errb)
	var got experimentReport
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s %s", code, err, out.String(), errb.String())
	}
	if got.Experiment == nil || got.Experiment.Status != loop.ExperimentDone || !got.ExcitationOK || got.Kp == nil {
		t.Fatalf("report %s; want the experiment done and a proposal", out.String())
	}
	if g := got.Model.Gain; math.Abs(g/s.Plant.Gain-1) > 0.15 {
		t.Errorf("gain %.4f; want %.4f within 15 %%", g, s.Plant.Gain)
	}
	t.Logf("%s", strings.Join(strings.Fields(out.String()), " "))
}

func TestExperimentMaxRateStep(t *testing.T) {
	s := experimentScenario()
	r := runExperiment(t, s, "id=e3,step=10,abort_above=70,max_duration=10m,max_rate_step=100", 10*time.Minute, 25*time.Minute)
	ticks, end := r.running()
	if len(ticks) < 8 || end < 0 {
		t.Fatalf("experiment ran %d ticks, ended at %d; want 10, then done", len(ticks), end)
	}
	x := r.states[end].Experiment
	pts := r.rec.file.Points
	far := 0.0
	for _, i := range ticks {
		far = math.Max(far, math.Abs(pts[i].Rate-x.Rate))
	}
	if far > 100+1e-9 || far < 99 {
		t.Errorf("the rate moved at most %.1f msg/s from the pre-experiment %.1f; want it held at max_rate_step 100 (a 10-point step asks for 200)", far, x.Rate)
	}
}
