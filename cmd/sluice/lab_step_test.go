package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/pkg/ident"
)

func TestLabStep(t *testing.T) {
	tests := []struct {
		name                    string
		args                    []string
		gain, tauPlusDead, base float64
	}{
		{"reference noiseless", nil, 0.05, 20, 10},
		{"reference noisy", []string{"--noise", "1", "--seed", "3"}, 0.05, 20, 10},
		{"other plant, step down", []string{"--gain", "0.02", "--base", "25", "--tau", "40s", "--dead-time", "12s",
			"--noise", "1", "--seed", "11", "--step-from", "2000", "--step-to", "1000", "--step-at", "3m"}, 0.02, 52, 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, append([]string{"lab", "step", "--json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("lab step %v exit %d, stderr %q", tc.args, code, errOut)
			}
			o := identifyJSON(t, out)
			if e := math.Abs(o.Model.Gain-tc.gain) / tc.gain; e > 0.10 {
				t.Errorf("gain = %v; want %v within 10%%", o.Model.Gain, tc.gain)
			}
			if e := math.Abs(o.Model.Tau+o.Model.DeadTime-tc.tauPlusDead) / tc.tauPlusDead; e > 0.10 {
				t.Errorf("tau + dead time = %v + %v; want %v within 10%%", o.Model.Tau, o.Model.DeadTime, tc.tauPlusDead)
			}
			if math.Abs(o.Model.Base-tc.base) > 1.5 {
				t.Errorf("base = %v; want about %v", o.Model.Base, tc.base)
			}
		})
	}
}

// TestLabStepCSVRoundTrip checks that the CSV lab step writes identifies to
// the same model through lab identify.
func TestLabStepCSVRoundTrip(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "step.csv")
	code, stepOut, errOut := runCmd(t, "lab", "step", "--json", "--noise", "0.5", "--csv", csvPath, "--plot", filepath.Join(dir, "step.svg"))
	if code != 0 {
		t.Fatalf("lab step exit %d, stderr %q", code, errOut)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ident.ReadCSV(f)
	if err != nil || d.Len() != 600 {
		t.Fatalf("lab step CSV: %d samples, %v; want 600 (8 min after a step at 2 min, every second)", d.Len(), err)
	}
	code, idOut, errOut := runCmd(t, "lab", "identify", "--json", "--csv", csvPath)
	if code != 0 {
		t.Fatalf("lab identify exit %d, stderr %q", code, errOut)
	}
	if stepOut != idOut {
		t.Errorf("lab step printed %s; lab identify on its CSV printed %s", stepOut, idOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "step.svg")); err != nil {
		t.Errorf("lab step --plot: %v", err)
	}
}

func TestLabStepBadInput(t *testing.T) {
	testBadInput(t, []string{"lab", "step"}, []badInput{
		{[]string{"--step-from", "600", "--step-to", "600"}, "no step"},
		{[]string{"--step-from", "-5"}, `invalid value "-5" for flag -step-from`},
		{[]string{"--step-to", "NaN"}, `invalid value "NaN" for flag -step-to`},
		{[]string{"--step-at", "2x"}, `invalid value "2x" for flag -step-at`},
		{[]string{"--tau", "soon"}, `invalid value "soon" for flag -tau`},
		{[]string{"--step-to", "3000"}, "saturates at 0 and 100 %"},
		{[]string{"--gain", "0"}, "gain"},
		{[]string{"--sample", "0s"}, "sample period 0s"},
		{[]string{"--step-at", "20m", "--duration", "10m"}, "before the end"},
		{[]string{"--plot", "out.gif"}, ".svg or .png"},
	})
}
