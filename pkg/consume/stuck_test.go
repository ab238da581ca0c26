package consume_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// stuckSink stores every message but the one with id stuck, which it fails
// (retryably) on every try, as a destination that chokes on one record; or
// fails everything while down.
type stuckSink struct {
	stuck string
	down  bool
	n     int
}

func (s *stuckSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	out := make([]consume.Result, len(msgs))
	for i, m := range msgs {
		if s.down || m.ID == s.stuck {
			out[i] = consume.Result{Outcome: consume.Retryable, Reason: "HTTP 503"}
			continue
		}
		s.n++
	}
	return out, nil
}

func retried(m consume.Message) consume.Message { m.ReceiveCount++; return m }

// One record that the destination fails on every try while it takes the
// others is that record's fault, not the destination's: its retries,
// handed back alone (as the Kafka source does after their backoff), must
// not open the circuit. When they did, every half-open probe took the same
// record, failed it, and doubled the wait: the whole consumer stalled for
// a minute behind one record (the chaos scenario kafka-stuck-record).
func TestStuckRecordDoesNotOpenTheCircuit(t *testing.T) {
	clk := newFakeClock()
	sink := &stuckSink{stuck: "id-1"}
	c, _ := newConsumer(clk, 1e6, sink)
	ctx := context.Background()
	batch := msgs(`{"a":1}`, `{"b":2}`, `{"c":3}`)
	rep := c.Process(ctx, batch)
	if ids(rep.Stored) != "id-0,id-2" || ids(rep.Retry) != "id-1" {
		t.Fatalf("first batch: stored [%s] retry [%s]", ids(rep.Stored), ids(rep.Retry))
	}
	stuck := batch[1]
	for try := range 6 {
		stuck = retried(stuck)
		clk.Advance(c.Breaker().Wait())
		rep = c.Process(ctx, []consume.Message{stuck})
		if ids(rep.Retry) != "id-1" {
			t.Fatalf("retry %d: retry [%s] deferred [%s]", try, ids(rep.Retry), ids(rep.Deferred))
		}
		if st := c.Breaker().State(); st != consume.CircuitClosed {
			t.Fatalf("after the stuck record's retry %d alone the circuit is %s; want closed", try+1, st)
		}
		if w := c.Breaker().Wait(); w != 0 {
			t.Fatalf("after the stuck record's retry %d the consumer waits %v before the next batch; want 0", try+1, w)
		}
	}
	// The others keep flowing.
	if rep = c.Process(ctx, msgs(`{"d":4}`)); ids(rep.Stored) != "id-0" {
		t.Fatalf("healthy batch after the retries: stored [%s] deferred [%s]", ids(rep.Stored), ids(rep.Deferred))
	}
}

// The destination going down is still the destination's fault: batches of
// messages that never failed before, and their retries, open the circuit,
// also after a stuck record was seen.
func TestDestinationDownStillOpensTheCircuit(t *testing.T) {
	clk := newFakeClock()
	sink := &stuckSink{stuck: "id-1"}
	c, _ := newConsumer(clk, 1e6, sink)
	ctx := context.Background()
	batch := msgs(`{"a":1}`, `{"b":2}`)
	c.Process(ctx, batch) // id-1 fails alone: its own fault
	c.Process(ctx, []consume.Message{retried(batch[1])})
	sink.down = true
	fresh := []consume.Message{{ID: "f-1", Body: []byte(`{}`)}, {ID: "f-2", Body: []byte(`{}`)}}
	for try := range 3 {
		clk.Advance(c.Breaker().Wait())
		rep := c.Process(ctx, fresh)
		if len(rep.Retry) != 2 {
			t.Fatalf("try %d while down: retry [%s]", try, ids(rep.Retry))
		}
		for i := range fresh {
			fresh[i] = retried(fresh[i])
		}
	}
	if st := c.Breaker().State(); st != consume.CircuitOpen {
		t.Fatalf("after three whole batches failed while the destination is down the circuit is %s; want open", st)
	}
}
