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
	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
)

func main() {
	consumerenv.Start(loadConfig, build, func(h *kafkasource.LambdaHandler) any { return h.Handle })
}
