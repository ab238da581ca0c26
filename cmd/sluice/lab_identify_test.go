package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/sim/lab"
)

// identifyJSON decodes the output of `lab identify --json`, checking that it
// holds exactly the contract's fields.
func identifyJSON(t *testing.T, out string) lab.Fit {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("output %q is not JSON: %v", out, err)
	}
	if _, ok := raw["rmse"]; !ok || len(raw) != 2 {
		t.Errorf("output keys %v; want model and rmse", keys(raw))
	}
	var model map[string]float64
	if err := json.Unmarshal(raw["model"], &model); err != nil {
		t.Fatalf("model %s: %v", raw["model"], err)
	}
	for _, k := range []string{"gain", "tau_s", "dead_time_s", "base"} {
		if _, ok := model[k]; !ok {
			t.Errorf("model %v has no %q", model, k)
		}
	}
	var o lab.Fit
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func keys[V any](m map[string]V) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// testdata/step_noisy.csv is `sluice lab step --noise 1 --seed 7 --csv`: the
// reference plant (gain 0.05, tau 15 s, dead time 5 s, base 10) stepped from
// 600 to 1200 msg/s at 120 s, sampled every second, 1 point of noise.
func TestLabIdentifyCSV(t *testing.T) {
	plotPath := filepath.Join(t.TempDir(), "fit.svg")
	code, out, errOut := runCmd(t, "lab", "identify", "--csv", "testdata/step_noisy.csv", "--json", "--plot", plotPath)
	if code != 0 {
		t.Fatalf("lab identify exit %d, stderr %q", code, errOut)
	}
	o := identifyJSON(t, out)
	if e := math.Abs(o.Model.Gain-0.05) / 0.05; e > 0.10 {
		t.Errorf("gain = %v; want 0.05 within 10%%", o.Model.Gain)
	}
	if e := math.Abs(o.Model.Tau+o.Model.DeadTime-20) / 20; e > 0.10 {
		t.Errorf("tau + dead time = %v + %v; want 20 s within 10%%", o.Model.Tau, o.Model.DeadTime)
	}
	if math.Abs(o.Model.Base-10) > 1 {
		t.Errorf("base = %v; want about 10", o.Model.Base)
	}
	if o.RMSE < 0.8 || o.RMSE > 1.2 {
		t.Errorf("rmse = %v; want about the noise, 1", o.RMSE)
	}
	b, err := os.ReadFile(plotPath)
	if err != nil {
		t.Fatalf("plot not written: %v", err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil || !strings.Contains(string(b), "<title>FOPDT fit</title>") {
		t.Errorf("plot %s is not an SVG with the fit (%v)", plotPath, err)
	}
}

func TestLabIdentifyBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rows := func(f func(i int) string) string {
		var b strings.Builder
		b.WriteString("t_s,input,output\n")
		for i := range 40 {
			b.WriteString(f(i) + "\n")
		}
		return b.String()
	}
	step := func(i int) (float64, float64) {
		if i < 10 {
			return 600, 40
		}
		return 1200, 70 - 30*math.Exp(-float64(i-10)/5)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no step", []string{"--csv", write("flat.csv", rows(func(i int) string { return fmt.Sprintf("%d,600,40", i) }))}, "no step in the input"},
		{"time not increasing", []string{"--csv", write("time.csv", rows(func(i int) string {
			u, y := step(i)
			ti := i
			if i == 20 {
				ti = 19
			}
			return fmt.Sprintf("%d,%v,%v", ti, u, y)
		}))}, "time is not strictly increasing"},
		{"NaN", []string{"--csv", write("nan.csv", rows(func(i int) string {
			u, y := step(i)
			if i == 5 {
				return fmt.Sprintf("%d,%v,NaN", i, u)
			}
			return fmt.Sprintf("%d,%v,%v", i, u, y)
		}))}, "output is \"NaN\""},
		{"bad header", []string{"--csv", write("hdr.csv", "time,rate,cpu\n1,2,3\n")}, `no column "t_s"`},
		{"too few", []string{"--csv", write("few.csv", "t_s,input,output\n0,1,2\n1,2,3\n")}, "too few samples"},
		{"missing file", []string{"--csv", filepath.Join(dir, "nope.csv")}, "no such file"},
		{"no csv flag", nil, "--csv FILE is required"},
		{"bad plot name", []string{"--csv", "testdata/step_noisy.csv", "--plot", filepath.Join(dir, "x.jpg")}, ".svg or .png"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, []string{"lab", "identify"}, badInput{tc.args, tc.want}) })
	}
}
