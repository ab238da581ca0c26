package consume

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Source delivers messages and learns their fate. A message that is neither
// acknowledged nor released comes back by itself after the source's timeout
// (SQS visibility timeout, Kafka uncommitted offset), so a crash loses nothing.
type Source interface {
	// Receive returns up to max messages; it may block (long polling) until
	// at least one is there or ctx ends, and may return none.
	Receive(ctx context.Context, max int) ([]Message, error)
	// Ack tells the source that msgs are stored: delete them (SQS) or allow
	// their offsets to be committed (Kafka).
	Ack(ctx context.Context, msgs []Message) error
	// Release gives back msgs that were not stored, for redelivery.
	Release(ctx context.Context, msgs []Message) error
}

// DeadLetterer is the optional capability of a Source to move poison
// messages to a dead-letter queue or topic itself, with their reason. A
// Source without it gets its poison messages released instead, so that its
// own redrive policy (SQS maxReceiveCount) moves them; the reason is logged.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, poison []Poison) error
}

// Retrier is the optional capability of a Source to take back messages
// that the destination failed and deliver them again only after a backoff
// that grows with their deliveries (SQS: a visibility timeout from
// ApproximateReceiveCount; Kafka: a delay per record, and the dead-letter
// topic after a bounded number of attempts). cause is the destination's
// failure. A Source without it gets them released.
type Retrier interface {
	Retry(ctx context.Context, msgs []Message, cause string) error
}

// OutageRetrier is the optional capability of a Retrier that bounds each
// message's attempts (Kafka: the dead-letter topic after MaxAttempts) to
// take back messages that failed while the whole destination was failing
// (Report.Outage: an outage, a brownout), with the same backoff but
// without counting the failure against that bound: a record is exhausted
// by failures of its own, while the destination takes others, not by a
// brownout that fails every record alike.
type OutageRetrier interface {
	Retrier
	RetryOutage(ctx context.Context, msgs []Message, cause string) error
}

// Sink stores messages at the destination (MySQL, an HTTP service).
type Sink interface {
	// Store stores msgs and returns one Result per message, in order. A
	// non-nil error means that none of msgs is stored (all retryable); the
	// results are then ignored. Storing an ID twice must not duplicate it.
	Store(ctx context.Context, msgs []Message) ([]Result, error)
}

// RateReader reads the allowed rate of a loop (the RATE item). It returns an
// error wrapping protocol.ErrNotFound when the loop has no RATE item.
type RateReader interface {
	ReadRate(ctx context.Context, loopID string) (protocol.Rate, error)
}

// Clock is the time a consumer runs on: the wall clock in production, a fake
// or accelerated one in tests and the demo.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or returns ctx.Err() when ctx ends first.
	Sleep(ctx context.Context, d time.Duration) error
}

// Prober is the optional capability of a Sink to tell whether its
// destination is up without storing anything (MySQL: a ping and a trivial
// query; HTTP: a request whose answer shows the service up). The
// controller asks for it, through the consumer function, while it holds the
// event source mapping off for an outage, so that no message spends a
// receive on the question.
type Prober interface {
	// Probe returns nil when the destination is up, why not otherwise.
	Probe(ctx context.Context) error
}
