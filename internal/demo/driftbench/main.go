// Command driftbench measures how fast the production loop says its model
// drifted (STATE model_drift) on the reference scenario: for each seed, a
// run per plant change (at -at, the controller not told; the run ends -after
// later) and a whole reference run without a change (false alarms). It
// prints one JSON line per run, then a summary line. With -check it exits 1
// when a change of gain was said late (or never) or a run without a change
// said one: a change of dead time is reported, not checked (at a steady
// rate it leaves a fraction of the noise in the signal: see "visible").
//
//	go run ./internal/demo/driftbench -seeds 5 -noise 1 -check
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
)

func main() {
	seeds := flag.Int("seeds", 5, "number of seeds (1..n)")
	noise := flag.Float64("noise", 1, "measurement noise, points")
	at := flag.Duration("at", 30*time.Minute, "when the plant changes")
	after := flag.Duration("after", 15*time.Minute, "how long a change run lasts after the change")
	quiet := flag.Bool("quiet", true, "also run the whole reference scenario without a change")
	changes := flag.Bool("changes", true, "run the plant changes")
	check := flag.Bool("check", false, "exit 1 when a gain change is said late or a run without a change says one")
	flag.Parse()
	sum, err := run(*seeds, *noise, *at, *after, *quiet, *changes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "driftbench:", err)
		os.Exit(1)
	}
	if *check && (sum.FalseAlarms > 0 || sum.lateGain > 0) {
		fmt.Fprintf(os.Stderr, "driftbench: %d gain changes said late or never, %d false alarms\n", sum.lateGain, sum.FalseAlarms)
		os.Exit(1)
	}
}

// summary is the last line: per change, the worst ticks-to-detect and how
// many runs missed the 10-tick bound; the false alarms of the quiet runs.
type summary struct {
	Worst       map[string]int `json:"worst_ticks"`
	Late        map[string]int `json:"late_runs"`
	FalseAlarms int            `json:"false_alarms"`
	QuietRuns   int            `json:"quiet_runs"`
	lateGain    int
}

func run(seeds int, noise float64, at, after time.Duration, quiet, changes bool) (summary, error) {
	dt := 20 * time.Second
	list := []sim.PlantChange{{At: at, Gain: 0.1}, {At: at, Gain: 0.025}, {At: at, DeadTime: &dt}}
	if !changes {
		list = nil
	}
	sum := summary{Worst: map[string]int{}, Late: map[string]int{}}
	enc := json.NewEncoder(os.Stdout)
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		s := sim.Reference()
		s.Noise = noise
		for _, c := range list {
			f, err := demo.MeasureDrift(ctx, s, &c, seed, after)
			if err != nil {
				return sum, err
			}
			if err := enc.Encode(f); err != nil {
				return sum, err
			}
			if f.Ticks < 1 || f.Ticks > demo.DriftBound {
				sum.Late[f.Change]++
				if c.Gain != 0 {
					sum.lateGain++
				}
			}
			if w, ok := sum.Worst[f.Change]; f.Ticks < 0 || !ok || (w >= 0 && f.Ticks > w) {
				sum.Worst[f.Change] = f.Ticks
			}
		}
		if quiet {
			f, err := demo.MeasureDrift(ctx, s, nil, seed, 0)
			if err != nil {
				return sum, err
			}
			if err := enc.Encode(f); err != nil {
				return sum, err
			}
			sum.QuietRuns++
			if f.Ticks >= 0 {
				sum.FalseAlarms++
			}
		}
	}
	return sum, enc.Encode(sum)
}
