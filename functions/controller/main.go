// Command controller is the Sluice controller Lambda: invoked by an
// EventBridge schedule, it ticks every enabled loop in the table. It reads
// every loop's metric with batched reads (CloudWatch GetMetricData, or
// Prometheus), runs each loop's PID controller, and writes STATE and RATE in
// one conditional transaction per loop. A loop that owns an SQS event
// source mapping (PARAMS esm_uuid) also gets the mapping's
// MaximumConcurrency set (pkg/adapter/lambdaesm; docs/controller.md). Build
// it for provided.al2023:
//
//	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap
//
// Configuration (environment): SLUICE_TABLE (default "sluice"),
// SLUICE_PROMETHEUS_URL (optional: enables loops with metric_source
// prometheus), SLUICE_METRICS_NAMESPACE (EMF namespace, default "Sluice"),
// SLUICE_HISTORY ("off" disables the dashboard's history items, one per loop
// per tick in the same table, written with BatchWriteItem), AWS_ENDPOINT_URL
// (a local endpoint such as moto_server).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	lambdaapi "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluice-dev/sluice/functions/internal/envconf"
	"github.com/sluice-dev/sluice/internal/version"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// config is the controller's configuration, read once at start.
type config struct {
	Table         string
	PrometheusURL string
	Namespace     string
	Endpoint      string
	History       bool
}

func readConfig(getenv func(string) string) config {
	r := envconf.New(getenv)
	return config{
		Table:         r.String("SLUICE_TABLE", ddbstore.DefaultTable),
		PrometheusURL: getenv("SLUICE_PROMETHEUS_URL"),
		Namespace:     r.String("SLUICE_METRICS_NAMESPACE", "Sluice"),
		Endpoint:      getenv("AWS_ENDPOINT_URL"),
		History:       r.On("SLUICE_HISTORY"),
	}
}

func newHandler(ctx context.Context, cfg config, log *slog.Logger) (*handler, error) {
	awsCfg, err := awsconf.Load(ctx)
	if err != nil {
		return nil, err
	}
	readers, err := metricsources.Readers(metricsources.Config{
		AWS: awsCfg, Endpoint: cfg.Endpoint, PrometheusURL: cfg.PrometheusURL})
	if err != nil {
		return nil, err
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	store := ddbloop.New(ddb, cfg.Table)
	var hist history
	if cfg.History {
		hist = ddbhistory.New(ddb, cfg.Table)
	}
	return &handler{
		history: hist,
		ticker: &loop.Ticker{Store: store, Sources: metricsources.All(), Metrics: readers, Now: time.Now,
			Mappings: lambdaesm.New(lambdaapi.NewFromConfig(awsCfg))},
		log:       log,
		namespace: cfg.Namespace,
		now:       time.Now,
	}, nil
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	log.Info("start", version.Attrs()...)
	h, err := newHandler(context.Background(), readConfig(os.Getenv), log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "controller: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(h.handle)
}
