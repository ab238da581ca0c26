package kafkasource_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// orphanSink refuses every message as waiting for its parent and records
// the deliveries it saw.
type orphanSink struct {
	mu   sync.Mutex
	seen []consume.Message
}

func (s *orphanSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, msgs...)
	out := make([]consume.Result, len(msgs))
	for i := range out {
		out[i] = consume.Result{Outcome: consume.Retryable, Waiting: true, Reason: "missing parent row"}
	}
	return out, nil
}

// A Kafka mapping retries a failed batch whole, and every record of it
// came as a first delivery (ReceiveCount 1, no first delivery time): a
// sink that waits a bounded number of deliveries for a missing parent
// (mysqlsink's OrderingAttempts and OrderingWait) waited for ever, the
// orphan held its partition, and with an on-failure destination AWS
// discarded the whole batch after 10 retries. The handler counts the
// deliveries of the records it failed: the retry of the batch on this
// instance hands the sink the record's delivery and its first time.
func TestLambdaHandlerCountsDeliveriesOfARetriedBatch(t *testing.T) {
	sink := &orphanSink{}
	h := lambdaHandler(1000, sink, &fakeDeadLetters{})
	ev := events.KafkaEvent{EventSource: "aws:kafka", EventSourceARN: "arn:aws:kafka:us-east-1:111122223333:cluster/msk/2",
		Records: map[string][]events.KafkaRecord{"orders-0": {{Topic: "orders", Partition: 0, Offset: 7, Value: "e30=",
			Timestamp: events.MilliSecondsEpochTime{Time: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}}}}}
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := h.Handle(ctx, ev); err == nil {
			t.Fatal("Handle with the record refused for a missing parent = nil; want an error (the batch is retried)")
		}
		cancel()
	}
	if len(sink.seen) != 3 {
		t.Fatalf("the sink saw %d deliveries; want 3", len(sink.seen))
	}
	first := sink.seen[0].FirstReceivedAt
	for i, m := range sink.seen {
		if m.ReceiveCount != i+1 || first.IsZero() || !m.FirstReceivedAt.Equal(first) {
			t.Errorf("invocation %d: ReceiveCount %d, FirstReceivedAt %v; want %d and the first invocation's time (%v)", i+1, m.ReceiveCount, m.FirstReceivedAt, i+1, first)
		}
	}
}
