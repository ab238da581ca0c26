package consume_test

import (
	"context"
	"testing"
)

// A destination that refuses everything from the first batch on (a proxy
// answering 400 to all since before the consumer started) must not cost
// the batches that come before the window can judge it: a batch most of
// whose messages (at least half a batch) the destination refused, while
// the window holds too few results to tell, is held, not dead-lettered.
// Not one healthy message reaches the dead-letter path.
func TestMassPoisonFromTheFirstBatchDeadLettersNothing(t *testing.T) {
	sink := &ratioSink{poison: 10}
	c, clk, _ := loggedConsumer(sink)
	ctx := context.Background()
	dead, held := 0, 0
	for b := range 10 {
		clk.Advance(c.Breaker().Wait())
		rep := c.Process(ctx, tenFresh(b))
		dead += len(rep.Poison)
		held += len(rep.Deferred)
	}
	if dead != 0 || held == 0 {
		t.Errorf("a destination refusing all from the start: %d dead-lettered, %d held; want 0 dead-lettered, the rest held", dead, held)
	}
}

// A small batch refused at the start (fewer than half a batch) is its
// messages' fault, window or not: dead-lettered with its reason.
func TestSmallPoisonBatchAtStartIsDeadLettered(t *testing.T) {
	sink := &ratioSink{poison: 10}
	c, _, _ := loggedConsumer(sink)
	rep := c.Process(context.Background(), tenFresh(0)[:2])
	if len(rep.Poison) != 2 || len(rep.Deferred) != 0 {
		t.Errorf("two refused messages as the first batch: poison %d, held %d; want 2 dead-lettered", len(rep.Poison), len(rep.Deferred))
	}
}
