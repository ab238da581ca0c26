package control_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden_trace.json")

// goldenCase is one controller run through the golden trace: a
// configuration, and edits made to it at given steps.
type goldenCase struct {
	name  string
	cfg   control.Config
	edits map[int]func(*control.Config)
}

func goldenCases() []goldenCase {
	ff := &control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	base := control.Config{Kp: 4, Ki: 0.11, Min: 10, Max: 3000, MeasurementMin: 0, MeasurementMax: 100}
	with := func(f func(*control.Config)) control.Config { c := base; f(&c); return c }
	return []goldenCase{
		{name: "pi", cfg: base},
		{name: "pid-filter-slew", cfg: with(func(c *control.Config) { c.Kd, c.DerivativeFilter, c.Slew = 30, 20*time.Second, 200 })},
		{name: "conditional-ff-spf", cfg: with(func(c *control.Config) {
			c.AntiWindup, c.Feedforward, c.SetpointFilter = control.AntiWindupConditional, ff, 60*time.Second
		})},
		{name: "back-calculation", cfg: with(func(c *control.Config) { c.AntiWindup, c.Max = control.AntiWindupBackCalculation, 1000 })},
		{name: "delay-aware-noise-band", cfg: with(func(c *control.Config) {
			c.AntiWindup, c.Feedforward, c.DelayAware, c.NoiseBand = control.AntiWindupConditional, ff, true, 1.5
		})},
		{name: "edits", cfg: with(func(c *control.Config) { c.AntiWindup, c.Feedforward = control.AntiWindupConditional, ff }),
			edits: map[int]func(*control.Config){
				40:  func(c *control.Config) { c.Kp, c.Kd = 8, 10 },
				60:  func(c *control.Config) { c.Mode, c.ManualRate = control.ModeManual, 300 },
				80:  func(c *control.Config) { c.Mode = control.ModeAuto },
				100: func(c *control.Config) { c.Max = 800 },
				120: func(c *control.Config) { c.Feedforward = nil },
			}},
	}
}

// goldenInput is the step's input: a first-order plant seen through a
// delayed, averaged metric, with a stale stretch, a setpoint change, a
// disturbance and a period where the plant takes less than the output.
func goldenInput(k int, cpu float64, rate float64) control.Input {
	in := control.Input{
		Setpoint: 70, Measurement: cpu, SamplingInterval: time.Minute,
		MeasurementAge: 90 * time.Second, MeasurementPeriod: time.Minute,
	}
	if k >= 90 {
		in.Setpoint = 50
	}
	if k >= 30 && k < 36 { // the metric stops
		in.Measurement = math.NaN()
	}
	if k == 50 { // a datapoint out of order
		in.MeasurementAge = 4 * time.Minute
	}
	if k >= 130 && k < 140 { // the queue runs dry
		in.ActualKnown, in.ActualRate = true, rate/3
	}
	return in
}

// trimmed is the state without its segment histories (their lengths are
// recorded; their effect shows in every later output).
func trimmed(s control.State) control.State {
	s.Applied, s.Reference = nil, nil
	return s
}

// TestGoldenTrace keeps the controller's behaviour bit for bit: every
// output and state of six configurations over 150 updates with stale
// metrics, an out-of-order datapoint, edits of gains, mode, bounds and
// feedforward, a disturbance and a dry queue.
func TestGoldenTrace(t *testing.T) {
	var buf bytes.Buffer
	for _, gc := range goldenCases() {
		c := control.Controller{Config: gc.cfg}
		cpu, rate := 10.0, 0.0
		for k := range 150 {
			if e := gc.edits[k]; e != nil {
				e(&c.Config)
			}
			dist := 0.0
			if k >= 70 && k < 85 {
				dist = 20
			}
			out := c.Update(goldenInput(k, cpu, rate))
			rate = out.Rate
			target := math.Min(100, 10+0.05*rate+dist)
			cpu += (target - cpu) * (1 - math.Exp(-60.0/15))
			st := c.State
			line, err := json.Marshal(struct {
				Case    string         `json:"case"`
				K       int            `json:"k"`
				Out     control.Output `json:"out"`
				State   control.State  `json:"state"`
				Applied int            `json:"applied"`
				Ref     int            `json:"reference"`
			}{gc.name, k, out, trimmed(st), len(st.Applied), len(st.Reference)})
			if err != nil {
				t.Fatalf("%s step %d: %v", gc.name, k, err)
			}
			fmt.Fprintf(&buf, "%s\n", line)
		}
	}
	const path = "testdata/golden_trace.jsonl"
	if *updateGolden {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := bytes.Split(buf.Bytes(), []byte("\n"))
	for i, w := range bytes.Split(want, []byte("\n")) {
		if i >= len(got) || !bytes.Equal(got[i], w) {
			t.Fatalf("golden trace differs at line %d:\ngot  %s\nwant %s", i+1, got[min(i, len(got)-1)], w)
		}
	}
}
