package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

// pointRecorder keeps a history point per tick of a lab run, as the
// controller and the consumers' report would.
type pointRecorder struct {
	p   sim.Policy
	pts []history.Point
}

func (r *pointRecorder) Rate(o sim.Observation) float64 {
	rate := r.p.Rate(o)
	pt := history.Point{T: time.Unix(1_700_000_000, 0).Add(o.Now).UTC(), Setpoint: o.Setpoint, Measured: math.NaN(),
		Rate: rate, Consumed: math.NaN(), P: 0, I: 0, FF: 0, Depth: math.NaN(), Mode: "auto"}
	if o.OK {
		pt.Measured = o.Datapoint.Value
	}
	if o.Now > 0 {
		pt.Consumed = o.Processed
	}
	r.pts = append(r.pts, pt)
	return rate
}

// writeLabHistory runs the product controller on s and writes its history
// as `sluice demo --history-out` does.
func writeLabHistory(t *testing.T, s sim.Scenario) string {
	t.Helper()
	return writeLabHistoryGains(t, s, lab.Gains{})
}

// readLabHistory is the history writeLabHistory writes, read back.
func readLabHistory(t *testing.T, s sim.Scenario) history.File {
	t.Helper()
	f, err := history.ReadFile(writeLabHistory(t, s), 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeLabHistoryGains is writeLabHistory with the gains g (the tuned ones
// where nil), and the loop's PARAMS in the file, as the demo writes them.
func writeLabHistoryGains(t *testing.T, s sim.Scenario, g lab.Gains) string {
	t.Helper()
	plant := lab.Plant{Model: s.Plant, NoiseSD: s.Noise}
	pol, _, err := lab.NewPolicy(lab.PIAWSPFF, s, plant, g)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mustConfig(t, s, g)
	rec := &pointRecorder{p: pol}
	if _, err := sim.Run(s, rec); err != nil {
		t.Fatal(err)
	}
	h := newHistoryRecorder(s)
	h.file.Points = rec.pts
	h.file.Params = demo.DefaultParams(s, cfg).Attrs(looptest.Sources())
	path := filepath.Join(t.TempDir(), "history.json")
	if err := h.write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTuneFromHistoryJSON(t *testing.T) {
	s := sim.Reference()
	s.Noise = 1
	path := writeLabHistory(t, s)
	var got struct {
		Model struct {
			Gain, TauS, DeadTimeS, Base float64
		} `json:"model"`
		Kp           *float64       `json:"kp"`
		Ki           *float64       `json:"ki"`
		ExcitationOK bool           `json:"excitation_ok"`
		Params       map[string]any `json:"params"`
	}
	out := runJSON(t, &got, "tune", "--from-history", "--history-file", path, "--json")
	if !got.ExcitationOK || got.Kp == nil || got.Ki == nil || *got.Ki <= 0 || math.Abs(got.Model.Gain-0.05) > 0.0075 || math.Abs(got.Model.Base-10) > 2 || got.Params["ff_gain"] == nil {
		t.Fatalf("tune --from-history = %s; want excitation_ok, kp, the gain within 15 %% of 0.05, the base within 2 of 10, params", out)
	}
}

func TestTuneFromHistoryRefuses(t *testing.T) {
	s := sim.Reference()
	s.Noise, s.SetpointChanges, s.Disturbances = 1, nil, nil
	path := writeLabHistory(t, s)
	var out, errb bytes.Buffer
	code := run([]string{"tune", "--from-history", "--history-file", path, "--since", "2h", "--json"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "no proposal") || !strings.Contains(out.String(), `"excitation_ok": false`) ||
		strings.Contains(out.String(), `"kp"`) || !strings.Contains(out.String(), "for 90 % of the ticks the processed rate stayed within") {
		t.Fatalf("exit %d, stdout %s, stderr %s; want exit 1, excitation_ok false with the reason, no kp", code, out.String(), errb.String())
	}
}

func TestTuneFromHistoryBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"tune", "--from-history"}, 2},
		{[]string{"tune", "--from-history", "--history-file", bad}, 1},
		{[]string{"tune", "--from-history", "--history-file", filepath.Join(t.TempDir(), "missing.json")}, 1},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != c.code || errb.Len() == 0 {
			t.Errorf("sluice %q = exit %d (stderr %q); want %d with a message", c.args, code, errb.String(), c.code)
		}
	}
}

func TestDemoHistoryOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.json")
	var out, errb bytes.Buffer
	args := []string{"demo", "--quiet", "--plot", "", "--duration", "20m", "--backlog", "100000", "--history-out", path}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	f, err := history.ReadFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Loop != "demo" || len(f.Points) != 20 || f.PipelineDelayS != 150 || f.MetricPeriodS != 60 {
		t.Fatalf("history file: loop %q, %d points, pipeline %v s, period %v s; want demo, 20 (one per tick), 150, 60", f.Loop, len(f.Points), f.PipelineDelayS, f.MetricPeriodS)
	}
	last := f.Points[len(f.Points)-1]
	if math.IsNaN(last.Consumed) || math.IsNaN(last.Measured) || last.Rate <= 0 || last.ConsumedSmoothing != 0 {
		t.Fatalf("last point %+v: want the consumed rate (raw: no smoothing), the measured CPU and the rate", last)
	}
	if kept, _ := history.ReadFile(path, 5*time.Minute); len(kept.Points) != 6 {
		t.Fatalf("--since 5m kept %d points; want 6 (the newest and the five minutes before it)", len(kept.Points))
	}
}

// tableWithHistory creates a table on the test's DynamoDB with the loop's
// PARAMS and its history's points as HIST items, and returns its name.
func tableWithHistory(t *testing.T, loopID string, params map[string]any, pts []history.Point) (string, *ddbloop.Store) {
	t.Helper()
	testenv.AWSEndpoint(t)
	client, table := ddbtest.Table(t, "sluice-tune")
	ctx := context.Background()
	store := ddbloop.New(client, table)
	if err := store.WriteParams(ctx, loopID, params); err != nil {
		t.Fatal(err)
	}
	hist := ddbhistory.New(client, table)
	for _, p := range pts {
		if err := hist.Append(ctx, loopID, p); err != nil {
			t.Fatal(err)
		}
	}
	return table, store
}

func TestTuneFromHistoryTable(t *testing.T) {
	s := sim.Reference()
	s.Noise = 1
	f := readLabHistory(t, s)
	table, _ := tableWithHistory(t, "orders", storetest.SampleParams("orders").Attrs(looptest.Sources()), f.Points)
	var got struct {
		Model struct {
			Gain float64 `json:"gain"`
		} `json:"model"`
		Confidence struct {
			Samples        int     `json:"samples"`
			PipelineDelayS float64 `json:"pipeline_delay_s"`
		} `json:"confidence"`
	}
	out := runJSON(t, &got, "tune", "--from-history", "--loop", "orders", "--table", table, "--json")
	if math.Abs(got.Model.Gain-0.05) > 0.0075 || got.Confidence.PipelineDelayS != 150 || got.Confidence.Samples < 170 {
		t.Fatalf("tune --loop = %s; want the gain within 15 %% of 0.05, pipeline delay 150 s (from PARAMS and --metric-delay), all the ticks", out)
	}
}

// Without the consumers' report (Consumed unknown, as before the report
// existed) the allowed rate of the tick before stands in for the input.
func TestTuneFromHistoryAllowedRate(t *testing.T) {
	s := sim.Reference()
	s.Noise = 1
	f := readLabHistory(t, s)
	for i := range f.Points {
		f.Points[i].Consumed = math.NaN()
	}
	h, input := identHistory(f.Points)
	if input != "allowed" || h.U[1] != f.Points[0].Rate {
		t.Fatalf("input %q, U[1] %v; want allowed, the rate of tick 0 (%v)", input, h.U[1], f.Points[0].Rate)
	}
	out, err := identifyAndPropose(f, pipelineOptions(f, 0, 0))
	if err != nil || math.Abs(out.Model.Gain-0.05) > 0.0075 {
		t.Fatalf("identify on the allowed rate: gain %v, %v; want within 15 %% of 0.05", out.Model.Gain, err)
	}
}

// The HIST items' consumed rate is the controller's average
// (ConsumedSmoothing): the fit's input is the raw rate behind it, while a
// raw figure (the demo's, an old item's) is taken as it is.
func TestIdentHistoryUndoesSmoothing(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a := math.Exp(-5.0 / 30)
	raw, avg := []float64{4, 4, 10, 10, 2}, 4.0
	var smoothed, plain []history.Point
	for k, r := range raw {
		if k > 0 {
			avg = a*avg + (1-a)*r
		}
		tk := t0.Add(time.Duration(5*k) * time.Second)
		smoothed = append(smoothed, history.Point{T: tk, Measured: 10, Consumed: avg, ConsumedSmoothing: loop.ProcessedSmoothing})
		plain = append(plain, history.Point{T: tk, Measured: 10, Consumed: r})
	}
	for name, pts := range map[string][]history.Point{"smoothed": smoothed, "raw": plain} {
		h, input := identHistory(pts)
		for k, r := range raw {
			if math.Abs(h.U[k]-r) > 1e-9 || input != "processed" {
				t.Errorf("%s: U[%d] = %v (input %s); want the raw rate %v", name, k, h.U[k], input, r)
			}
		}
	}
}
