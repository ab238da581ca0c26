// Command driftbench measures how fast the production loop says its model
// drifted (STATE model_drift) on the reference scenario: for each seed, a
// run per plant change (at -at, the controller not told; the run ends -after
// later) and a whole reference run without a change (false alarms). It
// prints one JSON line per run, then a summary line. -edits adds, per
// duration in its list, a run of the change of dead time with a setpoint
// edit (70 % to 50 %) that long after the change (and long enough after it
// for DriftBound ticks). With -check it exits 1 when a change of gain was
// said late (or never) or a run without a change said one. A change of dead
// time is reported, not checked: at a steady rate it leaves a fraction of
// the noise in the signal (see "visible"); after an edit it leaves a few
// tens of noise variances, which a test that never fires on noise sees
// most of the time, not always (late_runs counts the runs not said within
// DriftBound ticks of the edit).
//
//	go run ./internal/demo/driftbench -seeds 5 -noise 1 -edits 1m,5m,15m -check
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
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
	var edits durations
	flag.Var(&edits, "edits", "comma list of delays after the change of a setpoint edit, each a run of the dead-time change")
	check := flag.Bool("check", false, "exit 1 when a gain change is said late or a run without a change says one")
	flag.Parse()
	sum, err := run(*seeds, *noise, *at, *after, *quiet, *changes, edits)
	if err != nil {
		fmt.Fprintln(os.Stderr, "driftbench:", err)
		os.Exit(1)
	}
	if *check && (sum.FalseAlarms > 0 || sum.lateGain > 0) {
		fmt.Fprintf(os.Stderr, "driftbench: %d gain changes said late or never, %d false alarms\n", sum.lateGain, sum.FalseAlarms)
		os.Exit(1)
	}
}

// durations is a flag of a comma list of durations.
type durations []time.Duration

func (d *durations) String() string { return fmt.Sprint(*d) }

func (d *durations) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		x, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		*d = append(*d, x)
	}
	return nil
}

// summary is the last line: per change (and edit), the worst ticks-to-detect
// from the change and how many runs missed the 10-tick bound (from the
// edit, for a run with one); the false alarms of the quiet runs and their
// largest dead-time evidence.
type summary struct {
	Worst       map[string]int `json:"worst_ticks"`
	Late        map[string]int `json:"late_runs"`
	FalseAlarms int            `json:"false_alarms"`
	QuietRuns   int            `json:"quiet_runs"`
	QuietMaxDT  float64        `json:"quiet_max_dead_time_evidence"`
	lateGain    int
}

// plan is one run of a change: the change, and a setpoint edit that long
// after it (0: none).
type plan struct {
	change sim.PlantChange
	edit   time.Duration
}

func run(seeds int, noise float64, at, after time.Duration, quiet, changes bool, edits []time.Duration) (summary, error) {
	dt := 20 * time.Second
	var list []plan
	if changes {
		list = []plan{{change: sim.PlantChange{At: at, Gain: 0.1}}, {change: sim.PlantChange{At: at, Gain: 0.025}},
			{change: sim.PlantChange{At: at, DeadTime: &dt}}}
		for _, e := range edits {
			list = append(list, plan{change: sim.PlantChange{At: at, DeadTime: &dt}, edit: e})
		}
	}
	sum := summary{Worst: map[string]int{}, Late: map[string]int{}}
	enc := json.NewEncoder(os.Stdout)
	ctx := context.Background()
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		for _, p := range list {
			f, err := measure(ctx, noise, p, seed, after)
			if err != nil {
				return sum, err
			}
			if err := enc.Encode(f); err != nil {
				return sum, err
			}
			sum.add(f, p)
		}
		if quiet {
			s := sim.Reference()
			s.Noise = noise
			f, err := demo.MeasureDrift(ctx, s, nil, seed, 0)
			if err != nil {
				return sum, err
			}
			if err := enc.Encode(f); err != nil {
				return sum, err
			}
			sum.QuietRuns++
			sum.QuietMaxDT = max(sum.QuietMaxDT, f.MaxDeadTimeEvidence)
			if f.Ticks >= 0 {
				sum.FalseAlarms++
			}
		}
	}
	return sum, enc.Encode(sum)
}

// measure runs p on the reference scenario: with an edit, the setpoint goes
// from 70 % to 50 % that long after the change, and the run lasts at least
// DriftBound+1 ticks after the edit.
func measure(ctx context.Context, noise float64, p plan, seed uint64, after time.Duration) (demo.DriftFigure, error) {
	s := sim.Reference()
	s.Noise = noise
	if p.edit > 0 {
		s.SetpointChanges = []sim.SetpointChange{{At: p.change.At + p.edit, Value: 50}}
		after = max(after, p.edit+(demo.DriftBound+1)*s.Tick)
	}
	return demo.MeasureDrift(ctx, s, &p.change, seed, after)
}

// add counts f, the figure of p, in the summary.
func (sum *summary) add(f demo.DriftFigure, p plan) {
	key := f.Change
	if f.EditAfter != "" {
		key += "+edit@" + f.EditAfter
	}
	// With an edit, the bound counts from the edit.
	from := int(p.edit / sim.Reference().Tick)
	if f.Ticks < 1 || f.Ticks-from > demo.DriftBound {
		sum.Late[key]++
		if p.change.Gain != 0 {
			sum.lateGain++
		}
	}
	if w, ok := sum.Worst[key]; f.Ticks < 0 || !ok || (w >= 0 && f.Ticks > w) {
		sum.Worst[key] = f.Ticks
	}
}
