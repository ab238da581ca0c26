// Command sqs-consumer is the SQS consumer Lambda (provided.al2023, binary
// bootstrap): one invocation is one batch of the SQS event source mapping,
// paced to this consumer's share of the loop's allowed rate and stored in
// MySQL or an HTTP service; what was not stored is returned as batch item
// failures (ReportBatchItemFailures). Configuration is read from the
// environment (see config.go); the logic lives in pkg/consume and
// pkg/adapter/sqsqueue.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(2)
	}
	h, closeSink, err := build(context.Background(), cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	defer closeSink()
	lambda.Start(h.Handle)
}
