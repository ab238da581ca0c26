// Command sqs-consumer is the SQS consumer Lambda (provided.al2023, binary
// bootstrap): one invocation is one batch of the SQS event source mapping,
// paced to this consumer's share of the loop's allowed rate and stored in
// MySQL or an HTTP service; what was not stored is returned as batch item
// failures (ReportBatchItemFailures). Configuration is read from the
// environment (see config.go); the logic lives in pkg/consume and
// pkg/adapter/sqsqueue.
package main

import (
	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
)

func main() {
	consumerenv.Start(loadConfig, build, func(h *sqsqueue.Handler) any { return h.Invoke })
}
