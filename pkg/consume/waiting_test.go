package consume_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// waitingSink answers the first `waiting` messages of each batch as
// waiting for their parent (Retryable, Waiting) and stores the rest.
type waitingSink struct{ waiting int }

func (s *waitingSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	out := make([]consume.Result, len(msgs))
	for i := range msgs {
		if i < s.waiting {
			out[i] = consume.Result{Outcome: consume.Retryable, Waiting: true, Reason: "MySQL refused the message for a missing parent row"}
		}
	}
	return out, nil
}

// Children before their parents (a topic's partitions consumed side by
// side, a queue without order) make a destination that works refuse most
// messages for a while. Those refusals are the messages' order, not the
// destination's failure: they must not open the circuit (which hands
// every message back untried, spending their deliveries until the
// ordering retry runs out and healthy children are dead-lettered), nor
// count a batch of only such children as a failed batch.
func TestWaitingMessagesDoNotOpenTheCircuit(t *testing.T) {
	sink := &waitingSink{waiting: 8}
	c, _, _ := loggedConsumer(sink)
	ctx := context.Background()
	for b := range 10 {
		rep := c.Process(ctx, tenFresh(b))
		if len(rep.Retry) != 8 || len(rep.Stored) != 2 || rep.Outage {
			t.Fatalf("batch %d, 8 of 10 waiting for their parents: retry %d, stored %d, deferred %d, outage %v; want 8 retried, 2 stored, no outage",
				b, len(rep.Retry), len(rep.Stored), len(rep.Deferred), rep.Outage)
		}
	}
	sink.waiting = 10
	for b := range 5 {
		if rep := c.Process(ctx, tenFresh(20+b)); len(rep.Retry) != 10 || rep.Outage {
			t.Fatalf("a batch of children only: retry %d, deferred %d, outage %v; want all 10 retried, no outage", len(rep.Retry), len(rep.Deferred), rep.Outage)
		}
	}
	if c.Breaker().Failing() || c.Breaker().Wait() > 0 {
		t.Errorf("after batches mostly waiting for their parents: failing %v, wait %v; want the circuit closed and no outage", c.Breaker().Failing(), c.Breaker().Wait())
	}
}
