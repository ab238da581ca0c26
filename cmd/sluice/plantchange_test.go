package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParsePlantChanges(t *testing.T) {
	got, err := parsePlantChanges("30m=gain=0.1,tau=30s, 90m=dead-time=20s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].At != 30*time.Minute || got[0].Gain != 0.1 || got[0].Tau == nil || *got[0].Tau != 30*time.Second ||
		got[0].DeadTime != nil || got[1].At != 90*time.Minute || got[1].DeadTime == nil || *got[1].DeadTime != 20*time.Second {
		t.Fatalf("parsePlantChanges = %v; want 30m=gain=0.1,tau=30s and 90m=dead-time=20s", got)
	}
	for _, bad := range []string{"30m", "gain=0.1", "30m=gain=x", "30m=gain=-1", "30m=speed=2", "x=gain=0.1", "30m=tau=-1s"} {
		if _, err := parsePlantChanges(bad); err == nil {
			t.Errorf("parsePlantChanges(%q) = nil error; want one", bad)
		}
	}
}

func TestLabCompareFloorAndPlantChange(t *testing.T) {
	var rep struct {
		Scenario struct {
			PlantChanges []string `json:"plant_changes"`
		} `json:"scenario"`
		IAEFloor float64 `json:"iae_floor"`
		Results  []struct {
			IAE           float64 `json:"iae"`
			IAEFloorRatio float64 `json:"iae_floor_ratio"`
			Events        []struct {
				Kind  string  `json:"kind"`
				Floor float64 `json:"floor"`
			} `json:"events"`
			PlantChanges []struct {
				Stable bool `json:"stable"`
			} `json:"plant_changes"`
		} `json:"results"`
	}
	runJSON(t, &rep, "lab", "compare", "--controllers", "pi-aw-spf-ff", "--plant-change", "30m=dead-time=20s", "--json")
	r := rep.Results[0]
	if rep.IAEFloor != 8400 || r.IAEFloorRatio != r.IAE/8400 || len(rep.Scenario.PlantChanges) != 1 || len(r.PlantChanges) != 1 || len(r.Events) != 5 {
		t.Fatalf("floor %v, result %+v, scenario changes %v; want floor 8400, floor ratio IAE/8400, one plant change, five events",
			rep.IAEFloor, r, rep.Scenario.PlantChanges)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"lab", "compare", "--controllers", "pi", "--duration", "40m", "--plant-change", "30m=gain=0.1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "iae_floor 1200 point-s") || !strings.Contains(out.String(), "plant changes (the controller is not told): 30m0s=gain=0.1") {
		t.Fatalf("table has no floor or no plant-change section:\n%s", out.String())
	}
}
