package main

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

// runCmd runs the CLI with args and returns the exit code and outputs.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runJSON runs `sluice args...`, wants exit status 0, decodes the output
// into v and returns it.
func runJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	code, out, errOut := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("sluice %s = exit %d; want 0 (stderr %s)", strings.Join(args, " "), code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("sluice %s: output %q is not JSON: %v", strings.Join(args, " "), out, err)
	}
	return out
}

// badInput is a command line that a command refuses: exit status 2, nothing
// on stdout, and on stderr a message that holds want (any message when want
// is empty).
type badInput struct {
	args []string
	want string
}

// badArgs are bad inputs given by their arguments alone.
func badArgs(args [][]string) []badInput {
	cases := make([]badInput, len(args))
	for i, a := range args {
		cases[i] = badInput{args: a}
	}
	return cases
}

// testBadInput runs `sluice command... args...` for each case, in a subtest
// named by the arguments, and wants it refused (wantRefused).
func testBadInput(t *testing.T, command []string, cases []badInput) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) { wantRefused(t, command, tc) })
	}
}

// wantRefused runs `sluice command... args...` and wants the refusal tc
// describes.
func wantRefused(t *testing.T, command []string, tc badInput) {
	t.Helper()
	cmd := strings.Join(command, " ")
	code, out, errOut := runCmd(t, append(slices.Clone(command), tc.args...)...)
	if code != 2 || errOut == "" || !strings.Contains(errOut, tc.want) {
		t.Errorf("sluice %s %q = exit %d, stderr %q; want exit 2 and a message with %q", cmd, tc.args, code, errOut, tc.want)
	}
	if out != "" {
		t.Errorf("sluice %s %q wrote %q to stdout on bad input", cmd, tc.args, out)
	}
}

func TestTuneJSON(t *testing.T) {
	tests := []struct {
		args           []string
		rule           string
		kp, ki, kd, ti float64
		td             float64
	}{
		// SIMC: Kc = 15/(0.05 (5+5)) = 30, Ti = min(15, 40) = 15.
		{[]string{"--gain", "0.05", "--tau", "15s", "--dead-time", "5s"}, "simc", 30, 2, 0, 15, 0},
		// tau_c = 20s: Kc = 15/(0.05*25) = 12.
		{[]string{"--gain", "0.05", "--tau", "15s", "--dead-time", "5s", "--tauc", "20s"}, "simc", 12, 0.8, 0, 15, 0},
		// CloudWatch delay added: theta = 155 s, Kc = 15/(0.05*310).
		{[]string{"--gain", "0.05", "--tau", "15s", "--dead-time", "5s", "--extra-delay", "2m30s"}, "simc", 15 / 15.5, 1 / 15.5, 0, 15, 0},
		// Ziegler-Nichols PID: a = 1/60, Kc = 72, Ti = 10, Td = 2.5.
		{[]string{"--gain", "0.05", "--tau", "15s", "--dead-time", "5s", "--rule", "zn", "--form", "pid"}, "zn", 72, 7.2, 180, 10, 2.5},
		// IMC with lambda 10s: Kc = 15/(0.05*15) = 20.
		{[]string{"--gain", "0.05", "--tau", "15s", "--dead-time", "5s", "--rule", "imc", "--tauc", "10s"}, "imc", 20, 20.0 / 15, 0, 15, 0},
		// Cohen-Coon PI, r = 1/3: Kc = 60 (0.9 + 1/36), Ti = 465/47.
		{[]string{"--gain", "0.05", "--tau", "0.25m", "--dead-time", "5000ms", "--rule", "cc"}, "cc", 167.0 / 3, 167.0 / 3 / (465.0 / 47), 0, 465.0 / 47, 0},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, append([]string{"tune", "--json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("sluice tune %v exit %d, stderr %q", tc.args, code, errOut)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("sluice tune output %q is not JSON: %v", out, err)
			}
			if got["rule"] != tc.rule {
				t.Errorf("rule = %v; want %q", got["rule"], tc.rule)
			}
			for k, want := range map[string]float64{"kp": tc.kp, "ki": tc.ki, "kd": tc.kd, "ti_s": tc.ti, "td_s": tc.td} {
				v, ok := got[k].(float64)
				if !ok || math.Abs(v-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Errorf("%s = %v; want %v", k, got[k], want)
				}
			}
		})
	}
}

func TestTuneText(t *testing.T) {
	code, out, _ := runCmd(t, "tune", "--gain", "0.05", "--tau", "15s", "--dead-time", "5s")
	if code != 0 || !strings.Contains(out, "kp = 30 msg/s per point") {
		t.Errorf("sluice tune = %d, %q; want 0 and kp = 30", code, out)
	}
}

func TestTuneBadInput(t *testing.T) {
	testBadInput(t, []string{"tune"}, []badInput{
		{[]string{"--gain", "0.05", "--tau", "15s", "--rule", "foo"}, `unknown tuning rule "foo"`},
		{[]string{"--gain", "0.05", "--tau", "15"}, `invalid value "15" for flag -tau`},
		{[]string{"--gain", "0.05", "--tau", "abc"}, `invalid value "abc" for flag -tau`},
		{[]string{"--tau", "15s"}, "--gain is required"},
		{[]string{"--gain", "-1", "--tau", "15s"}, "must be a positive number"},
		{[]string{"--gain", "NaN", "--tau", "15s"}, "must be a positive number"},
		{[]string{"--gain", "0.05", "--tau", "15s", "--form", "pd"}, `unknown controller form "pd"`},
		{[]string{"--gain", "0.05", "--tau", "15s", "--rule", "zn"}, "positive dead time"},
		{[]string{"--gain", "0.05", "--tau", "-15s"}, "must not be negative"},
		{[]string{"--gain", "0.05", "--tau", "15s", "extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
	})
}

// TestHelp checks that every flag of the commands is explained, with its unit
// or format, and that -h exits 0.
func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"tune", "-h"}, []string{"-gain", "points of CPU per message/s", "-tau", "-dead-time", "-rule", "simc", "-tauc", "-form", "-json", "-extra-delay", "Go syntax"}},
		{[]string{"lab", "identify", "--help"}, []string{"-csv", "t_s,input,output", "-json", "-plot", ".svg or .png"}},
		{[]string{"lab", "step", "-h"}, []string{"-step-from", "-step-to", "-step-at", "messages/s", "-sample", "-gain", "-noise", "-json", "-plot", "-csv"}},
	}
	for _, tc := range tests {
		code, out, _ := runCmd(t, tc.args...)
		if code != 0 {
			t.Errorf("sluice %v exit %d; want 0", tc.args, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("sluice %v help does not mention %q:\n%s", tc.args, w, out)
			}
		}
	}
}

// FuzzTune feeds arbitrary flag values to `sluice tune`: it must exit 0 with
// finite gains in JSON, or 2 with a message, and never panic.
func FuzzTune(f *testing.F) {
	f.Add("0.05", "15s", "5s", "simc", "0s", "pi")
	f.Add("1e-300", "1h", "0s", "zn", "1ns", "pid")
	f.Add("NaN", "x", "-5s", "cc", "", "pd")
	f.Add("1e300", "0s", "1ns", "imc", "2562047h", "pid")
	f.Fuzz(func(t *testing.T, gain, tau, dead, rule, tauc, form string) {
		args := []string{"tune", "--json", "--gain=" + gain, "--tau=" + tau, "--dead-time=" + dead, "--rule=" + rule, "--form=" + form}
		if tauc != "" {
			args = append(args, "--tauc="+tauc)
		}
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		switch code {
		case 0:
			var g map[string]any
			if err := json.Unmarshal(out.Bytes(), &g); err != nil {
				t.Fatalf("sluice %q printed %q: not JSON: %v", args, out.String(), err)
			}
			for _, k := range []string{"kp", "ki", "kd", "ti_s", "td_s"} {
				if _, ok := g[k].(float64); !ok {
					t.Fatalf("sluice %q printed %s = %v; want a number", args, k, g[k])
				}
			}
		case 2:
			if errOut.Len() == 0 {
				t.Fatalf("sluice %q exit 2 without a message", args)
			}
		default:
			t.Fatalf("sluice %q exit %d (stderr %q); want 0 or 2", args, code, errOut.String())
		}
	})
}

// A command stops with exit status 2 when a flag it requires is empty.
func TestRequiredFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"local", "esm"}, "sluice local esm: --queue-url is required\n"},
		{[]string{"local", "kafka-esm", "--topics", ""}, "sluice local kafka-esm: --topics is required\n"},
		{[]string{"tune", "--experiment", "--step", "5"}, "sluice tune --experiment: --loop is required\n"},
	} {
		if code, out, errb := runCmd(t, tt.args...); code != 2 || errb != tt.want || out != "" {
			t.Errorf("sluice %v = exit %d, stdout %q, stderr %q; want 2 and %q", tt.args, code, out, errb, tt.want)
		}
	}
}
