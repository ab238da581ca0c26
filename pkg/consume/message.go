package consume

import "time"

// Message is one message taken from a queue or a topic.
type Message struct {
	// ID identifies the message across redeliveries (SQS MessageId, or
	// "topic/partition/offset" for Kafka). Sinks use it as the idempotency
	// key: storing the same ID twice must not duplicate anything.
	ID string
	// Body is the payload, as received.
	Body []byte
	// Attributes are source metadata (SQS message attributes, Kafka headers).
	Attributes map[string]string
	// ReceiveCount is how often the source has delivered the message, 1 on
	// the first delivery (0 when the source does not tell).
	ReceiveCount int
	// SentAt is when the producer sent the message (zero when unknown).
	SentAt time.Time
	// FirstReceivedAt is when the source first delivered the message (SQS
	// ApproximateFirstReceiveTimestamp; zero when unknown). On a later
	// delivery it tells how long the message has been waiting to be
	// stored, which an instance that started since does not know.
	FirstReceivedAt time.Time
	// Handle is opaque to this package: the Source that produced the message
	// reads it back in Ack, Release and DeadLetter (an SQS receipt handle, a
	// Kafka record).
	Handle any
}

// Outcome is what a sink did with one message.
type Outcome int

const (
	// Stored means the destination took the message: it may be acknowledged.
	Stored Outcome = iota
	// Retryable means the message was not stored but may be later (database
	// down, HTTP 5xx, 429, timeout): it is released for redelivery.
	Retryable
	// Permanent means the destination refused the message for good (HTTP 4xx
	// other than 429, a malformed payload): it goes to the dead-letter path.
	Permanent
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Stored:
		return "stored"
	case Retryable:
		return "retryable"
	case Permanent:
		return "permanent"
	}
	return "unknown"
}

// Result is a sink's outcome for one message, with the reason when it was
// not stored.
type Result struct {
	Outcome Outcome
	// Reason says why the message was not stored ("" when stored).
	Reason string
	// Waiting, with Retryable, says that the message waits for another
	// one the destination has not taken yet (a missing parent row,
	// children before parents): the destination works, so the message's
	// failure does not count against it (the breaker, the inner loop).
	Waiting bool
}

// CountStored is how many of a sink's results are Stored: what a batch
// added to the destination (a sink's wrapper counts its throughput with it).
func CountStored(res []Result) int {
	n := 0
	for _, r := range res {
		if r.Outcome == Stored {
			n++
		}
	}
	return n
}

// Poison is a message that must go to the dead-letter path, with the reason.
type Poison struct {
	Message Message
	Reason  string
}
