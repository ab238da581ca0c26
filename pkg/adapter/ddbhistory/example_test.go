package ddbhistory_test

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// The controller records one history point per applied tick, after
// loop.Ticker.Tick; the dashboard reads them back.
func ExampleMemory_AppendReports() {
	ctx := context.Background()
	hist := ddbhistory.NewMemory(0) // ddbhistory.New(dynamodbClient, table) in the controller
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	reports := []loop.Report{ // what ticker.Tick(ctx) returned
		{Loop: "orders", Outcome: loop.OutcomeApplied, Mode: loop.ModeAuto, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 72.5}, OutputReport: loop.OutputReport{Rate: 1150, P: -2.5, I: -40, FF: 1192.5}},
		{Loop: "billing", Outcome: loop.OutcomeLost, MeasurementReport: loop.MeasurementReport{Measured: math.NaN()}}, // another invocation applied it
	}
	if err := hist.AppendReports(ctx, now, reports); err != nil {
		fmt.Println(err)
	}
	for _, id := range []string{"orders", "billing"} {
		ps, _ := hist.Last(ctx, id, 10)
		fmt.Printf("%s: %d point(s)", id, len(ps))
		for _, p := range ps {
			fmt.Printf(", %s setpoint %.0f measured %.1f rate %.0f", p.T.Format(time.TimeOnly), p.Setpoint, p.Measured, p.Rate)
		}
		fmt.Println()
	}
	// Output:
	// orders: 1 point(s), 23:00:00 setpoint 70 measured 72.5 rate 1150
	// billing: 0 point(s)
}
