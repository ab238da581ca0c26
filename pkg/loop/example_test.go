package loop_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

func ExampleDecodeParams() {
	_, err := loop.DecodeParams("orders", map[string]any{
		"setpoint": 120.0, "kp": -1.0, "min_rate": 10.0, "max_rate": 1000.0, "tick_period": "soon",
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "orders-db"},
	}, looptest.Sources())
	var pe *loop.ParamsError
	if errors.As(err, &pe) {
		for _, f := range pe.Fields {
			fmt.Printf("%s: %s\n", f.Field, f.Reason)
		}
	}
	// Output:
	// tick_period: "soon" is not a duration; want e.g. "60s" or "1m30s"
	// setpoint: 120 is outside (0, 100] percent
	// kp: -1 must be a finite number >= 0
}

func ExampleTicker() {
	ctx := context.Background()
	store := memstore.New()
	_ = store.WriteParams(ctx, "orders", map[string]any{
		"setpoint": 70.0, "kp": 1.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "orders-db"},
	})
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	// Every query finds CPU at 50 %, published 90 s after its minute ended.
	t := &loop.Ticker{Sources: looptest.Sources(),
		Store:   store,
		Metrics: map[string]metric.Reader{cwmetric.Name: looptest.Metrics{Value: 50, Delay: 90 * time.Second}},
		Now:     func() time.Time { return now },
	}
	for range 3 {
		reports, _ := t.Tick(ctx)
		r := reports[0]
		fmt.Printf("tick %d: %s, CPU %.0f %%, rate %.1f msg/s\n", r.Tick, r.Outcome, r.Measured, r.Rate)
		now = now.Add(time.Minute)
	}
	rate, _ := store.ReadRate(ctx, "orders")
	fmt.Printf("RATE %.1f msg/s until %s\n", rate.PerSecond, rate.ExpiresAt.Format("15:04"))
	// Output:
	// tick 1: applied, CPU 50 %, rate 80.0 msg/s
	// tick 2: applied, CPU 50 %, rate 140.0 msg/s
	// tick 3: applied, CPU 50 %, rate 200.0 msg/s
	// RATE 200.0 msg/s until 12:05
}

// A TickStore refuses, before writing, a commit that does not advance
// STATE's version by one.
func ExampleCommit_Validate() {
	read := loop.State{Loop: "orders", Version: 4}
	next := read.Clone()
	next.Version = read.Version + 1
	fmt.Println(loop.Commit{PrevVersion: read.Version, State: next}.Validate())
	fmt.Println(loop.Commit{PrevVersion: read.Version, State: read}.Validate())
	// Output:
	// <nil>
	// loop "orders": new version 4 does not follow 4
}

func ExampleMappingConcurrency() {
	// Batches of 10 messages that take 0.5 s of work each (pacing
	// excluded), with the tick's 25 % headroom.
	for _, rate := range []float64{0, 16, 400, 800, 80000} {
		n := loop.MappingConcurrency(rate, 0.5, 10, loop.MappingHeadroom)
		fmt.Printf("%6.0f msg/s: MaximumConcurrency %d\n", rate, n)
	}
	// Output:
	//      0 msg/s: MaximumConcurrency 2
	//     16 msg/s: MaximumConcurrency 2
	//    400 msg/s: MaximumConcurrency 25
	//    800 msg/s: MaximumConcurrency 50
	//  80000 msg/s: MaximumConcurrency 1000
}

// An operator asks a running loop for a guarded setpoint step: the PARAMS
// attribute experiment, read by ParseExperiment.
func ExampleParseExperiment() {
	e, err := loop.ParseExperiment("id=e1,step=5,abort_above=85,max_duration=20m")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.ID, e.Step, e.AbortAbove, e.MaxDuration)
	_, err = loop.ParseExperiment("id=e2,step=30,abort_above=85,max_duration=20m")
	fmt.Println(err)
	// Output:
	// e1 5 85 20m0s
	// step 30: want a non-zero number of points, at most 20 either way
}
