package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoBadInput(t *testing.T) {
	testBadInput(t, []string{"demo"}, badArgs([][]string{
		{"--duration", "ten minutes"},
		{"--setpoint", "150"},
		{"--batch", "0"},
		{"--plot", "out.gif"},
		{"extra"},
	}))
}

func TestDemoJSON(t *testing.T) {
	plotPath := filepath.Join(t.TempDir(), "demo.svg")
	var got struct {
		Sluice struct {
			Lost     int64   `json:"lost"`
			IAERatio float64 `json:"iae_ratio"`
			Ticks    int     `json:"ticks"`
		} `json:"sluice"`
		Fixed struct {
			IAERatio float64 `json:"iae_ratio"`
		} `json:"fixed"`
		Plot string `json:"plot"`
	}
	runJSON(t, &got, "demo", "--json", "--duration", "30m", "--disturbance", "10m+10m=20", "--setpoint-change", "25m=50", "--backlog", "100000", "--plot", plotPath)
	if got.Sluice.Lost != 0 || got.Sluice.Ticks != 30 {
		t.Errorf("lost %d, ticks %d; want 0 and 30", got.Sluice.Lost, got.Sluice.Ticks)
	}
	if !(got.Sluice.IAERatio < got.Fixed.IAERatio) {
		t.Errorf("iae_ratio %.2f (sluice) vs %.2f (fixed); want sluice below the fixed rate", got.Sluice.IAERatio, got.Fixed.IAERatio)
	}
	if got.Plot != plotPath {
		t.Errorf("plot = %q; want %q", got.Plot, plotPath)
	}
}

func TestDemoHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("demo -h = exit %d", code)
	}
	for _, want := range []string{"-setpoint", "messages/s", "-plot"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("demo -h does not mention %q", want)
		}
	}
}
