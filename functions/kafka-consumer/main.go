// Command kafka-consumer is the Kafka consumer Lambda (provided.al2023,
// binary bootstrap) of an Amazon MSK or self-managed Kafka event source
// mapping: one invocation is one batch of records, paced to this
// consumer's share of the loop's allowed rate and stored in MySQL or an
// HTTP service. Poison records go to a dead-letter queue or topic with
// their reason; the invocation succeeds only when every record is stored
// or dead-lettered, else it fails and the mapping retries the batch.
// Configuration is read from the environment (see config.go); the logic
// lives in pkg/consume and pkg/adapter/kafkasource.
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
	h, closeAll, err := build(context.Background(), cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		os.Exit(1)
	}
	defer closeAll()
	lambda.Start(h.Handle)
}
