package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/ident"
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
	attrs, err := ddbloop.New(client, table).ReadParams(ctx, loopID)
	if err != nil {
		return history.File{}, fmt.Errorf("loop %s: read PARAMS: %w", loopID, err)
	}
	p, err := loop.DecodeParams(loopID, attrs, metricsources.All())
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

// historyFlags say where `tune --from-history` and `tune --shadow-report`
// read the live loop's history (a file, or the table with --loop) and how
// its measurement is timed.
type historyFlags struct {
	file, loopID, table               *string
	metricDelay, since, period, delay *time.Duration
}

// addHistoryFlags registers the history flags on fs; fileUsage and
// loopUsage say what --history-file and --loop are to the command.
func addHistoryFlags(fs *flag.FlagSet, fileUsage, loopUsage string) historyFlags {
	return historyFlags{
		file:        fs.String("history-file", "", fileUsage),
		loopID:      fs.String("loop", "", loopUsage),
		table:       fs.String("table", ddbstore.TableFromEnv(), "DynamoDB table with --loop (default: SLUICE_TABLE or sluice)"),
		metricDelay: fs.Duration("metric-delay", 90*time.Second, "with --loop: the metric's publication delay after its period ends"),
		since:       fs.Duration("since", 0, "keep only the last DURATION of the history (0: all of it)"),
		period:      fs.Duration("metric-period", 0, "the metric's averaging period (default: the file's, else 1m)"),
		delay:       fs.Duration("pipeline-delay", 0, "metric period/2 + publication delay + tick/2 (default: the file's, else 150s)"),
	}
}

// check says what is wrong when not exactly one of --history-file and
// --loop is given.
func (h historyFlags) check() error {
	if (*h.file == "") == (*h.loopID == "") {
		return errors.New("want one of --history-file FILE and --loop ID")
	}
	return nil
}

// read reads the history from --history-file or, with --loop, the table.
func (h historyFlags) read(ctx context.Context) (history.File, error) {
	if *h.file != "" {
		return history.ReadFile(*h.file, *h.since)
	}
	return readTableHistory(ctx, *h.table, *h.loopID, *h.since, *h.metricDelay)
}

// options are the measurement's timing of f (pipelineOptions) with the
// flags --metric-period and --pipeline-delay.
func (h historyFlags) options(f history.File) ident.ClosedLoopOptions {
	return pipelineOptions(f, *h.period, *h.delay)
}
