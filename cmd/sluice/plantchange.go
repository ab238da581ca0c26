package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
)

// parsePlantChanges parses a comma list of plant changes: an item AT=KEY=VALUE
// starts a change, an item KEY=VALUE (gain, tau, dead-time) adds to the one
// before it, e.g. "30m=gain=0.1,tau=30s,90m=dead-time=20s".
func parsePlantChanges(v string) ([]sim.PlantChange, error) {
	var out []sim.PlantChange
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		first, rest, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("plant change %q: want AT=gain=G[,tau=T][,dead-time=D], e.g. 30m=gain=0.1", item)
		}
		if strings.Contains(rest, "=") { // AT=KEY=VALUE: a new change
			at, err := parseOffset(first)
			if err != nil {
				return nil, fmt.Errorf("plant change %q: time: %w", item, err)
			}
			out = append(out, sim.PlantChange{At: at})
			first, rest, _ = strings.Cut(rest, "=")
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("plant change %q: want a time first, e.g. 30m=gain=0.1", item)
		}
		if err := setPlantValue(&out[len(out)-1], strings.TrimSpace(first), strings.TrimSpace(rest)); err != nil {
			return nil, fmt.Errorf("plant change %q: %w", item, err)
		}
	}
	return out, nil
}

// setPlantValue sets one KEY=VALUE of a plant change.
func setPlantValue(c *sim.PlantChange, key, val string) error {
	switch key {
	case "gain":
		g, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(g) || math.IsInf(g, 0) || g <= 0 {
			return fmt.Errorf("gain %q: want points of CPU per message/s, > 0", val)
		}
		c.Gain = g
	case "tau", "dead-time":
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 {
			return fmt.Errorf("%s %q: want a duration >= 0 like 20s", key, val)
		}
		if key == "tau" {
			c.Tau = &d
		} else {
			c.DeadTime = &d
		}
	default:
		return fmt.Errorf("unknown key %q: want gain, tau or dead-time", key)
	}
	return nil
}

// printPlantChanges prints each controller's response to the plant changes
// (robustness): settling time, the jump no controller avoids, the overshoot
// of the recovery, and whether it settled within sim.StableWithin.
func printPlantChanges(w io.Writer, rep lab.Report) {
	if len(rep.Scenario.PlantChanges) == 0 {
		return
	}
	fmt.Fprintf(w, "\nplant changes (the controller is not told): %s\n", strings.Join(rep.Scenario.PlantChanges, ", "))
	fmt.Fprintf(w, "%-13s %8s %9s %9s %9s %7s\n", "controller", "at", "settle_s", "peak_pp", "overshoot", "stable")
	for _, r := range rep.Results {
		for _, c := range r.PlantChanges {
			settle := "never"
			if c.SettleS != nil {
				settle = strconv.FormatFloat(*c.SettleS, 'f', 0, 64)
			}
			fmt.Fprintf(w, "%-13s %8v %9s %9.1f %9.2f %7v\n", r.Controller, time.Duration(c.AtS*float64(time.Second)),
				settle, c.PeakPP, c.OvershootPP, c.Stable)
		}
	}
	fmt.Fprintf(w, "stable: back within ±%g points of the setpoint for good within %v of the change\n", sim.SettlingBand, sim.StableWithin)
}
