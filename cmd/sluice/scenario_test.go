package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// parseCase is one input of a flag-value parser: the value it must give, or
// a piece of the error it must return.
type parseCase[T comparable] struct {
	in   string
	want T
	err  string
}

// testParse runs parse, named name in the messages, on every case.
func testParse[T comparable](t *testing.T, name string, parse func(string) (T, error), cases []parseCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parse(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s(%q) error = %v; want it to mention %q", name, tc.in, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%s(%q) = %+v, %v; want %+v", name, tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseSetpointChange(t *testing.T) {
	testParse(t, "parseSetpointChange", parseSetpointChange, []parseCase[sim.SetpointChange]{
		{in: "120m=50", want: sim.SetpointChange{At: 120 * time.Minute, Value: 50}},
		{in: " 90s = 65.5 ", want: sim.SetpointChange{At: 90 * time.Second, Value: 65.5}},
		{in: "120m", err: "want AT=VALUE"},
		{in: "abc=50", err: "not a duration"},
		{in: "-5m=50", err: "negative"},
		{in: "10m=NaN", err: "percentage"},
		{in: "10m=150", err: "percentage"},
		{in: "10m=0", err: "above 0"},
	})
}

func TestParseDisturbance(t *testing.T) {
	testParse(t, "parseDisturbance", parseDisturbance, []parseCase[sim.Disturbance]{
		{in: "60m+40m=20", want: sim.Disturbance{At: time.Hour, Duration: 40 * time.Minute, Size: 20}},
		{in: "0s+1h=-10", want: sim.Disturbance{At: 0, Duration: time.Hour, Size: -10}},
		{in: "60m=20", err: "AT+DURATION=SIZE"},
		{in: "60m+40m", err: "AT+DURATION=SIZE"},
		{in: "60m+0s=20", err: "positive"},
		{in: "60x+40m=20", err: "not a duration"},
		{in: "60m+40m=Inf", err: "size"},
		{in: "60m+40m=200", err: "size"},
	})
}

func TestScenarioFlags(t *testing.T) {
	parse := parseScenarioFlags
	s, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	ref := sim.Reference()
	if s.Plant != ref.Plant || s.Setpoint != 70 || len(s.SetpointChanges) != 1 || len(s.Disturbances) != 1 || s.MetricDelay != 90*time.Second {
		t.Fatalf("defaults = %+v; want the reference scenario %+v", s, ref)
	}
	s, err = parse("--gain", "0.08", "--tau", "30s", "--dead-time", "10s", "--setpoint-change", "30m=60,90m=40",
		"--setpoint-change", "100m=55", "--disturbance", "none", "--metric-delay", "3m")
	if err != nil {
		t.Fatal(err)
	}
	if s.Plant.Gain != 0.08 || s.Plant.Tau != 30*time.Second || s.Plant.DeadTime != 10*time.Second ||
		len(s.SetpointChanges) != 3 || s.SetpointChanges[2].Value != 55 || len(s.Disturbances) != 0 || s.MetricDelay != 3*time.Minute {
		t.Fatalf("parsed %+v", s)
	}
	testBadFlags(t, [][]string{
		{"--gain", "0"}, {"--gain", "NaN"}, {"--tick", "0s"}, {"--setpoint", "120"}, {"--tau", "5x"},
		{"--disturbance", "1h"}, {"--duration", "-1h"}, {"--noise", "-1"}, {"--max-rate", "Inf"},
	})
}

func FuzzParseSetpointChange(f *testing.F) {
	for _, s := range []string{"120m=50", "1h=0.5", "=", "x", "1s=1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseSetpointChange(s)
		if err == nil && (c.At < 0 || !(c.Value > 0 && c.Value <= 100)) {
			t.Fatalf("parseSetpointChange(%q) = %+v without error", s, c)
		}
	})
}

func FuzzParseDisturbance(f *testing.F) {
	for _, s := range []string{"60m+40m=20", "0s+1s=-1", "+=", "1h+1h=NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDisturbance(s)
		if err == nil && (d.At < 0 || d.Duration <= 0 || !(d.Size >= -100 && d.Size <= 100)) {
			t.Fatalf("parseDisturbance(%q) = %+v without error", s, d)
		}
	})
}

func TestScenarioPresetAndTrafficFlags(t *testing.T) {
	parse := parseScenarioFlags
	s, err := parse("--setpoint", "60", "--scenario", "idle-burst", "--burst", "10m=5,20m=6", "--producer-change", "30m=100")
	if err != nil {
		t.Fatal(err)
	}
	if s.Setpoint != 60 || s.ProducerRate != 400 || s.Backlog != 0 || s.Duration != 120*time.Minute || len(s.Disturbances) != 0 {
		t.Errorf("idle-burst with --setpoint 60 = %+v; want the preset with setpoint 60", s)
	}
	if len(s.Bursts) != 2 || s.Bursts[1] != (sim.Burst{At: 20 * time.Minute, N: 6}) || len(s.ProducerChanges) != 1 || s.ProducerChanges[0].Rate != 100 {
		t.Errorf("bursts %+v, producer changes %+v; want the flags' values", s.Bursts, s.ProducerChanges)
	}
	s, err = parse("--scenario", "idle-burst", "--burst", "none")
	if err != nil || len(s.Bursts) != 0 {
		t.Errorf("--burst none: %+v, %v; want no burst", s.Bursts, err)
	}
	testBadFlags(t, [][]string{{"--scenario", "nope"}, {"--burst", "10m"}, {"--burst", "10m=-1"}, {"--producer-change", "5m=NaN"}, {"--burst", "x=1"}})
}

func TestScenarioReplicaFlags(t *testing.T) {
	parse := parseScenarioFlags
	s, err := parse("--scenario", "replica-lag")
	if err != nil || s.Replica == nil || *s.Replica != *sim.ReplicaLagScenario().Replica {
		t.Fatalf("replica-lag: %+v, %v; want the preset's replica", s.Replica, err)
	}
	s, err = parse("--scenario", "replica-lag", "--replica-capacity", "900", "--lag-setpoint", "5", "--lag-band", "1",
		"--lag-metric-period", "15s", "--lag-metric-delay", "15s")
	want := sim.Replica{Capacity: 900, Setpoint: 5, Band: 1, MetricPeriod: 15 * time.Second, MetricDelay: 15 * time.Second}
	if err != nil || s.Replica == nil || *s.Replica != want {
		t.Fatalf("replica flags: %+v, %v; want %+v", s.Replica, err, want)
	}
	// A replica flag on a scenario without one adds the preset's replica
	// with that value.
	s, err = parse("--replica-capacity", "800")
	if err != nil || s.Replica == nil || s.Replica.Capacity != 800 || s.Replica.Setpoint != 10 || len(s.Disturbances) != 1 {
		t.Fatalf("--replica-capacity on the reference: %+v, %v; want the reference with a replica of 800 messages/s", s.Replica, err)
	}
	if s, err = parse(); err != nil || s.Replica != nil {
		t.Fatalf("reference: replica %+v, %v; want none", s.Replica, err)
	}
	testBadFlags(t, [][]string{{"--replica-capacity", "0"}, {"--lag-setpoint", "-1"}, {"--lag-metric-period", "0s"}, {"--lag-band", "NaN"}})
}

// testBadFlags checks that each set of scenario flags is refused.
func testBadFlags(t *testing.T, bad [][]string) {
	t.Helper()
	for _, args := range bad {
		if _, err := parseScenarioFlags(args...); err == nil {
			t.Errorf("flags %q: no error; want one", args)
		}
	}
}

// parseScenarioFlags parses args as the scenario flags of a command.
func parseScenarioFlags(args ...string) (sim.Scenario, error) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addScenarioFlags(fs)
	if err := fs.Parse(args); err != nil {
		return sim.Scenario{}, err
	}
	return f.Scenario()
}
