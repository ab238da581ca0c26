package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
)

// config is the function's configuration, read once from the environment:
// the loop, rate and sink settings every consumer Lambda shares
// (consumerenv.Config), and the SQS ones.
type config struct {
	consumerenv.Config
	DeadLetterURL string // SLUICE_DLQ_URL: where poison messages go with their reason
	QueueURL      string // SLUICE_QUEUE_URL: the mapping's queue, to set the visibility of messages handed back
}

func loadConfig(getenv func(string) string) (config, error) {
	base, err := consumerenv.Load(getenv)
	if err != nil {
		return config{}, err
	}
	return config{Config: base, DeadLetterURL: getenv("SLUICE_DLQ_URL"), QueueURL: getenv("SLUICE_QUEUE_URL")}, nil
}

// build wires the handler: the consumer (RATE reader, cache, sink) and SQS.
func build(ctx context.Context, c config, log *slog.Logger) (*sqsqueue.Handler, func(), error) {
	aws, cons, closer, err := consumerenv.Consumer(ctx, c.Config, log)
	if err != nil {
		return nil, nil, err
	}
	return &sqsqueue.Handler{
		Consumer:      cons,
		API:           sqs.NewFromConfig(aws),
		DeadLetterURL: c.DeadLetterURL,
		QueueURL:      c.QueueURL,
		Log:           log,
		Metrics:       os.Stdout,
		Loop:          c.Loop,
	}, closer, nil
}
