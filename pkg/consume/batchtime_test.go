package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// slowSink stores everything and takes per batch of the fake clock.
type slowSink struct {
	clk *fakeClock
	per time.Duration
}

func (s slowSink) Store(_ context.Context, m []consume.Message) ([]consume.Result, error) {
	s.clk.Advance(s.per)
	out := make([]consume.Result, len(m))
	for i := range out {
		out[i] = consume.Result{Outcome: consume.Stored}
	}
	return out, nil
}

// The consumer counts its batches, their messages and their working time
// without the pacing sleep: what sizes an event source mapping.
func TestProcessCountsBatchWorkWithoutPacing(t *testing.T) {
	clk := newFakeClock()
	c, _ := newConsumer(clk, 10, slowSink{clk, 300 * time.Millisecond})
	ctx := context.Background()
	start := clk.Now()
	for range 3 {
		c.Process(ctx, msgs(`{"a":1}`, `{"a":2}`, `{"a":3}`, `{"a":4}`, `{"a":5}`, `{"a":6}`, `{"a":7}`, `{"a":8}`, `{"a":9}`, `{"a":10}`))
	}
	c.Process(ctx, msgs(`not json`)) // poison only: never reaches the sink, counts as a batch of 1
	st := c.Stats()
	if st.Paced() < time.Second {
		t.Fatalf("paced %v; want the pacer to have slept (10 msg/s, 30 messages)", st.Paced())
	}
	if got := clk.Now().Sub(start); got < st.Paced()+900*time.Millisecond {
		t.Fatalf("elapsed %v; want pacing %v plus 3 stores of 300 ms", got, st.Paced())
	}
	if b, m, w := st.Batches.Load(), st.BatchMessages.Load(), st.Working(); b != 4 || m != 31 || w != 900*time.Millisecond {
		t.Errorf("batches %d, messages %d, working %v; want 4, 31, 900ms (pacing excluded)", b, m, w)
	}
}

// A batch deferred whole (rate zero) is no work: it is not counted.
func TestProcessDoesNotCountDeferredBatches(t *testing.T) {
	clk := newFakeClock()
	c, _ := newConsumer(clk, 0, slowSink{clk, 300 * time.Millisecond})
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(10*time.Second))
	defer cancel()
	rep := c.Process(ctx, msgs(`{"a":1}`))
	if len(rep.Deferred) != 1 || c.Stats().Batches.Load() != 0 {
		t.Errorf("deferred %d, batches %d; want the batch deferred and not counted", len(rep.Deferred), c.Stats().Batches.Load())
	}
}
