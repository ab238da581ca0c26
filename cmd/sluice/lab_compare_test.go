package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabCompareJSON(t *testing.T) {
	var rep struct {
		Scenario      map[string]any `json:"scenario"`
		Model         map[string]any `json:"model"`
		LoopDeadTimeS float64        `json:"loop_dead_time_s"`
		IAEBound      float64        `json:"iae_bound"`
		Results       []struct {
			Controller string              `json:"controller"`
			IAE        float64             `json:"iae"`
			IAERatio   float64             `json:"iae_ratio"`
			Overshoot  float64             `json:"start_overshoot_pp"`
			Lost       int64               `json:"lost"`
			Settling   map[string]*float64 `json:"settling_s"`
		} `json:"results"`
	}
	runJSON(t, &rep, "lab", "compare", "--controllers", "fixed,pi-aw-spf-ff", "--json")
	if rep.LoopDeadTimeS != 155 || rep.IAEBound != 18600 || len(rep.Results) != 2 {
		t.Fatalf("loop dead time %v, bound %v, %d results; want 155, 18600, 2", rep.LoopDeadTimeS, rep.IAEBound, len(rep.Results))
	}
	best := rep.Results[1]
	if best.Controller != "pi-aw-spf-ff" || best.Overshoot > 1 || best.IAERatio > 1.5 || best.Lost != 0 || best.IAE >= rep.Results[0].IAE {
		t.Fatalf("pi-aw-spf-ff: %+v; want overshoot <= 1, ratio <= 1.5, nothing lost, better than fixed", best)
	}
	for _, k := range []string{"start", "disturbance", "setpoint"} {
		if _, ok := best.Settling[k]; !ok {
			t.Errorf("settling_s has no %q", k)
		}
	}
}

func TestLabComparePlotAndTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cmp.svg")
	var out, errb bytes.Buffer
	code := run([]string{"lab", "compare", "--duration", "30m", "--controllers", "pi,smith", "--plot", path}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Fatalf("plot %s: %v (%d bytes)", path, err, len(b))
	}
	if !strings.Contains(out.String(), "smith") || !strings.Contains(out.String(), "never") {
		t.Fatalf("table lacks the controllers or the never-settled events:\n%s", out.String())
	}
}

func TestLabCompareBadInput(t *testing.T) {
	testBadInput(t, []string{"lab", "compare"}, badArgs([][]string{
		{"--controllers", "pi,foo"},
		{"--controllers", ""},
		{"--tick", "5x"},
		{"--gain", "NaN"},
		{"--setpoint-change", "120m"},
		{"--disturbance", "60m+40m=abc"},
		{"--kp", "-1"},
		{"--ki", "Inf"},
		{"--duration", "0s"},
		{"--plot", "out.gif"},
		{"extra"},
	}))
}

func TestLabCompareGainOverride(t *testing.T) {
	var a, b, errb bytes.Buffer
	if code := run([]string{"lab", "compare", "--controllers", "pi", "--json"}, &a, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	if code := run([]string{"lab", "compare", "--controllers", "pi", "--kp", "0", "--ki", "0.02", "--json"}, &b, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	if a.String() == b.String() {
		t.Fatal("--kp/--ki changed nothing")
	}
	if !strings.Contains(b.String(), `"ki": 0.02`) {
		t.Fatalf("overridden gain not reported:\n%s", b.String())
	}
}

func TestLabCompareReplicaLag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lag.svg")
	var rep struct {
		Scenario struct {
			Replica struct {
				Capacity    float64 `json:"capacity"`
				LagSetpoint float64 `json:"lag_setpoint_s"`
			} `json:"replica"`
		} `json:"scenario"`
		Results []struct {
			Controller string `json:"controller"`
			Signals    []struct {
				Name            string   `json:"name"`
				Setpoint        float64  `json:"setpoint"`
				MeanAfterSettle *float64 `json:"mean_after_settle"`
				Max             *float64 `json:"max"`
				IAELimiting     *float64 `json:"iae_limiting"`
				AboveBandS      *float64 `json:"above_band_s"`
			} `json:"signals"`
			LimitingSwitches *int `json:"limiting_switches"`
		} `json:"results"`
	}
	runJSON(t, &rep, "lab", "compare", "--scenario", "replica-lag", "--json", "--plot", path)
	if rep.Scenario.Replica.Capacity != 1000 || rep.Scenario.Replica.LagSetpoint != 10 || len(rep.Results) != 2 ||
		rep.Results[0].Controller != "pi-aw-spf-ff" || rep.Results[1].Controller != "override" {
		t.Fatalf("scenario %+v, results %+v; want the replica and the default controllers pi-aw-spf-ff, override", rep.Scenario, rep.Results)
	}
	for _, r := range rep.Results {
		if len(r.Signals) != 2 || r.Signals[0].Name != "cpu" || r.Signals[1].Name != "lag" || r.Signals[1].Setpoint != 10 ||
			r.Signals[1].MeanAfterSettle == nil || r.Signals[1].Max == nil || r.Signals[1].IAELimiting == nil ||
			r.Signals[1].AboveBandS == nil || r.LimitingSwitches == nil {
			t.Fatalf("%s: signals %+v, switches %v; want cpu and lag with their measures", r.Controller, r.Signals, r.LimitingSwitches)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte("replication lag")) {
		t.Fatalf("plot %s: %v; want a replication lag panel", path, err)
	}
	// Without a replica the result has the CPU's signal alone and no lag panel.
	var out, errb bytes.Buffer
	if code := run([]string{"lab", "compare", "--duration", "30m", "--controllers", "pi", "--json", "--plot", path}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	if !strings.Contains(out.String(), `"limiting_switches": 0`) || strings.Count(out.String(), `"name": "cpu"`) != 1 || strings.Contains(out.String(), `"name": "lag"`) {
		t.Fatalf("one-signal result:\n%s", out.String())
	}
	if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("replication lag")) {
		t.Fatal("lag panel without a replica")
	}
}
