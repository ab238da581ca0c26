package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// maxTableHistory is the most HIST items `tune --from-history --loop`
// reads: a week at one tick a minute.
const maxTableHistory = 7 * 24 * 60

// readTableHistory reads a loop's history from the table: its HIST items
// (the last since of them; a week at most) and the measurement's timing
// from its PARAMS (metric period and tick), with metricDelay as the
// metric's publication delay.
func readTableHistory(ctx context.Context, table, loopID string, since, metricDelay time.Duration) (history.File, error) {
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return history.File{}, err
	}
	client := dynamodb.NewFromConfig(cfg)
	attrs, err := ddbstore.New(client, table).ReadParams(ctx, loopID)
	if err != nil {
		return history.File{}, fmt.Errorf("loop %s: read PARAMS: %w", loopID, err)
	}
	p, err := loop.DecodeParams(loopID, attrs)
	if err != nil {
		return history.File{}, fmt.Errorf("loop %s: PARAMS: %w", loopID, err)
	}
	hist := ddbhistory.New(client, table)
	pts, err := hist.Last(ctx, loopID, maxTableHistory)
	if err != nil {
		return history.File{}, fmt.Errorf("loop %s: read history: %w", loopID, err)
	}
	f := history.File{
		Loop: loopID, TickS: p.TickPeriod.Seconds(), MetricPeriodS: p.Metric.Period.Seconds(),
		PipelineDelayS: (p.Metric.Period/2 + metricDelay + p.TickPeriod/2).Seconds(),
		Points:         history.KeepSince(pts, since), Params: attrs,
	}
	return f, nil
}
