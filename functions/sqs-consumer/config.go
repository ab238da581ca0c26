package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/functions/internal/envconf"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// config is the function's configuration, read once from the environment:
// the loop, rate and sink settings every consumer Lambda shares
// (consumerenv.Config), and the SQS ones.
type config struct {
	consumerenv.Config
	DeadLetterURL string // SLUICE_DLQ_URL: where poison messages go with their reason
	QueueURL      string // SLUICE_QUEUE_URL: the mapping's queue, to set the visibility of messages handed back
	// RetryBackoff is the first visibility of a message handed back after
	// the destination failed it (SLUICE_RETRY_BACKOFF, default 30s),
	// doubling with the receive count. OpenBackoff is the long backoff of
	// one handed back while the circuit is open (SLUICE_OPEN_BACKOFF,
	// default 4m, doubling): the visibility grows with the outage's age
	// from 30 s and reaches it only in a long outage.
	RetryBackoff, OpenBackoff consume.Backoff
	// QueueRetention (SLUICE_QUEUE_RETENTION) is the queue's retention
	// when SQS does not report it (a stand-in such as ElasticMQ).
	QueueRetention time.Duration
	// MaxRequeues (SLUICE_MAX_REQUEUES, a count, or off: -1) bounds how
	// often a message whose next receive is its last is sent again to the
	// queue while the destination fails (sqsqueue.Handler.MaxRequeues).
	MaxRequeues int
}

func loadConfig(getenv func(string) string) (config, error) {
	base, err := consumerenv.Load(getenv)
	if err != nil {
		return config{}, err
	}
	c := config{Config: base, DeadLetterURL: getenv("SLUICE_DLQ_URL"), QueueURL: getenv("SLUICE_QUEUE_URL"),
		RetryBackoff: sqsqueue.DefaultRetryBackoff(), OpenBackoff: sqsqueue.DefaultOpenBackoff()}
	r := envconf.New(getenv)
	c.RetryBackoff.Base = r.Duration("SLUICE_RETRY_BACKOFF", c.RetryBackoff.Base, "30s")
	c.OpenBackoff.Base = r.Duration("SLUICE_OPEN_BACKOFF", c.OpenBackoff.Base, "4m")
	c.QueueRetention = r.Duration("SLUICE_QUEUE_RETENTION", 0, "96h")
	c.MaxRequeues = -1
	if getenv("SLUICE_MAX_REQUEUES") != "off" {
		c.MaxRequeues = r.Count("SLUICE_MAX_REQUEUES", sqsqueue.DefaultMaxRequeues)
	}
	return c, r.Err()
}

// build wires the handler: the consumer (RATE reader, cache, sink) and SQS.
func build(ctx context.Context, c config, log *slog.Logger) (*sqsqueue.Handler, func(), error) {
	aws, cons, closer, err := consumerenv.Consumer(ctx, c.Config, log)
	if err != nil {
		return nil, nil, err
	}
	return &sqsqueue.Handler{
		Consumer:       cons,
		API:            sqs.NewFromConfig(aws),
		DeadLetterURL:  c.DeadLetterURL,
		QueueURL:       c.QueueURL,
		RetryBackoff:   c.RetryBackoff,
		OpenBackoff:    c.OpenBackoff,
		QueueRetention: c.QueueRetention,
		Log:            log,
		Metrics:        os.Stdout,
		Loop:           c.Loop,
	}, closer, nil
}
