package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
)

// defaultDemoController is the loop `sluice demo` runs without
// --controller: the cascade, which wins on the reference scenario
// (docs/lab.md, "The cascade").
const defaultDemoController = lab.Cascade

// withInner turns the consumers' inner loop on in cfg when controller is
// the cascade: in PARAMS (inner_loop, with the reaction time the step test
// suggests) and in the consumer, which reads it from there. Not without the
// consumers' report: the controller must be told what the cut withheld, or
// it takes the cut for a plant that took less and the two loops fight.
func withInner(cfg *demo.Config, controller string, m lab.Model) {
	if controller == lab.Cascade {
		demo.WithInner(cfg, m)
	}
}

// printOnset prints the disturbances' onsets apart: the seconds above
// setpoint + 5 and the IAE from each onset to the next event, where the
// inner loop acts.
func printOnset(w io.Writer, s sim.Scenario, ser sim.Series) {
	for _, e := range sim.IAEByEvent(s, ser) {
		if e.Kind != "disturbance" {
			continue
		}
		fmt.Fprintf(w, "disturbance onset at %s: %.0f s above sp+5, IAE %.0f point-s until the next event\n",
			fmtClock(time.Duration(e.AtS*float64(time.Second))), e.ViolationS, e.IAE)
	}
}
