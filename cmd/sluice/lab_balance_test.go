package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabBalanceJSON(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"1:2:3", []string{"--nodes", "3", "--capacities", "1:2:3", "--ticks", "40"}},
		{"1:10", []string{"--capacities", "1,10", "--ticks", "40", "--load", "0.5"}},
		{"random", []string{"--nodes", "10", "--capacities", "random", "--seed", "3", "--ticks", "40"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r struct {
				RoundRobin struct {
					MaxAvg float64 `json:"max_avg"`
				} `json:"round_robin"`
				PID struct {
					MaxAvg     float64 `json:"max_avg"`
					TicksTo105 *int    `json:"ticks_to_1_05"`
				} `json:"pid"`
			}
			out := runJSON(t, &r, append([]string{"lab", "balance", "--json"}, tt.args...)...)
			if r.PID.MaxAvg > 1.02 || r.PID.TicksTo105 == nil || *r.PID.TicksTo105 > 20 || r.RoundRobin.MaxAvg < 1.3 {
				t.Errorf("output %s; want pid max_avg <= 1.02 within 20 ticks, round_robin >= 1.3", out)
			}
		})
	}
}

func TestLabBalancePlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "balance.svg")
	var out, errb bytes.Buffer
	if code := run([]string{"lab", "balance", "--ticks", "20", "--plot", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d; want 0 (stderr %s)", code, errb.String())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("PI weights")) {
		t.Errorf("plot file is not the balance chart: %.200s", b)
	}
	if !strings.Contains(out.String(), "round-robin") {
		t.Errorf("text output %q lacks the round-robin row", out.String())
	}
}

func TestLabBalanceBadInput(t *testing.T) {
	testBadInput(t, []string{"lab", "balance"}, badArgs([][]string{
		{"--capacities", "1"},
		{"--capacities", "1:x:3"},
		{"--capacities", "1:-2"},
		{"--nodes", "4", "--capacities", "1:2:3"},
		{"--capacities", "random"},
		{"--ticks", "0"},
		{"--load", "0"},
		{"--ki", "-1"},
		{"--plot", "out.gif"},
		{"--bogus"},
		{"extra"},
	}))
}

func TestLabBalanceCascade(t *testing.T) {
	var r struct {
		Cascade []struct {
			Name        string  `json:"name"`
			Throughput  float64 `json:"throughput"`
			SecondsOver float64 `json:"seconds_over"`
		} `json:"cascade"`
	}
	runJSON(t, &r, "lab", "balance", "--cascade", "--json")
	if len(r.Cascade) != 8 {
		t.Fatalf("%d cascade variants; want 8", len(r.Cascade))
	}
	for _, v := range r.Cascade {
		if v.Name == "" || !(v.Throughput > 0) {
			t.Errorf("variant %+v: want a name and a positive throughput", v)
		}
	}
}
