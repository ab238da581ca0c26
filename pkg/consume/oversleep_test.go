package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// shareChange is a fake clock that changes the loop's RATE once virtual time
// passes at (the controller's next tick, or the event source mapping
// scaled down so that fewer instances share the rate).
type shareChange struct {
	*fakeClock
	at    time.Time
	rates *memqueue.Rates
	to    float64
}

func (c *shareChange) Sleep(ctx context.Context, d time.Duration) error {
	err := c.fakeClock.Sleep(ctx, d)
	if c.rates != nil && !c.Now().Before(c.at) {
		c.rates.Put(protocol.Rate{Loop: "l", PerSecond: c.to})
	}
	return err
}

// A Lambda invocation waiting for its batch's slot follows the rate while
// it waits: when its share rises after 2 s (1 → 5 msg/s), the batch of 10
// goes after 2 + 8/5 = 3.6 s, not after the 10 s the old share needed;
// when the loop is paused after 2 s, the batch is handed back then, not
// stored at 10 s against the pause. Each second of a sleep computed from a
// stale share is billed and wasted.
func TestProcessFollowsTheShareWhileWaiting(t *testing.T) {
	for _, c := range []struct {
		name            string
		to              float64
		stored          int
		atMost, atLeast time.Duration
	}{
		{"share rises", 5, 10, 4 * time.Second, 3 * time.Second},
		{"paused", 0, 0, 3 * time.Second, 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := newFakeClock()
			clk := &shareChange{fakeClock: fc, to: c.to}
			cons, rates := newConsumer(clk, 1, memqueue.NewSink())
			cons.Process(context.Background(), batch(10)) // spends the full bucket
			start := fc.Now()
			clk.at, clk.rates = start.Add(2*time.Second), rates
			rep := cons.Process(deadlineCtx{context.Background(), start.Add(27 * time.Second)}, batch(10))
			took := fc.Now().Sub(start)
			if len(rep.Stored) != c.stored || len(rep.Stored)+len(rep.Deferred) != 10 || took > c.atMost || took < c.atLeast {
				t.Errorf("stored %d, deferred %d after %v; want %d stored, the rest deferred, in %v to %v",
					len(rep.Stored), len(rep.Deferred), took, c.stored, c.atLeast, c.atMost)
			}
		})
	}
}
