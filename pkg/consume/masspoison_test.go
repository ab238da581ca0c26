package consume_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/pkg/consume"
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

// A destination that starts refusing everything after a healthy stretch
// (the window full of stored messages, so that its ratio crosses
// PoisonRatio only after two or three refused batches) dead-letters
// nothing either: a batch mostly refused is held on its messages' first
// delivery, and by the time they come back the window says mass poison.
func TestMassPoisonAfterHealthyStretchDeadLettersNothing(t *testing.T) {
	sink := &ratioSink{store: 10}
	c, clk, _ := loggedConsumer(sink)
	ctx := context.Background()
	for b := range 5 {
		c.Process(ctx, tenFresh(b))
	}
	sink.store, sink.poison = 0, 10
	dead, held := 0, 0
	for b := range 10 {
		clk.Advance(c.Breaker().Wait())
		rep := c.Process(ctx, tenFresh(10+b))
		dead += len(rep.Poison)
		held += len(rep.Deferred)
	}
	if dead != 0 || held == 0 {
		t.Errorf("a destination refusing all after a healthy stretch: %d dead-lettered, %d held; want 0 dead-lettered", dead, held)
	}
}

// Ten poison messages in a row (a producer's bad burst) are held on their
// first delivery, then, delivered again while the destination stores the
// others, dead-lettered once each with their reason.
func TestPoisonBurstIsDeadLetteredOnItsSecondDelivery(t *testing.T) {
	sink := &ratioSink{store: 10}
	c, _, _ := loggedConsumer(sink)
	ctx := context.Background()
	for b := range 5 {
		c.Process(ctx, tenFresh(b))
	}
	burst := tenFresh(9)
	sink.store, sink.poison = 0, 10
	if rep := c.Process(ctx, burst); len(rep.Deferred) != 10 || len(rep.Poison) != 0 {
		t.Fatalf("the burst's first delivery: held %d, dead-lettered %d; want 10 held", len(rep.Deferred), len(rep.Poison))
	}
	sink.store, sink.poison = 10, 0
	c.Process(ctx, tenFresh(20))
	for i := range burst {
		burst[i].ReceiveCount = 2
	}
	sink.store, sink.poison = 0, 10
	if rep := c.Process(ctx, burst); len(rep.Poison) != 10 || rep.Poison[0].Reason == "" {
		t.Errorf("the burst's second delivery: dead-lettered %d, held %d; want 10 dead-lettered with their reason", len(rep.Poison), len(rep.Deferred))
	}
}

// idSink refuses the messages it names as poison and stores the rest.
type idSink struct{ poison map[string]bool }

func (s *idSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	out := make([]consume.Result, len(msgs))
	for i, m := range msgs {
		if s.poison[m.ID] {
			out[i] = consume.Result{Outcome: consume.Permanent, Reason: "HTTP 422: no such customer"}
		}
	}
	return out, nil
}

// When the dead-letter queue refused for a while, the poison judged in
// that time comes back, and once the healthy messages are stored the
// queue's tail is mostly that poison. It was judged while the destination
// stored the others, so refused again it is dead-lettered, not read as a
// destination refusing everything: held, it would come back to the same
// verdict for as long as the queue keeps it, and drain a few messages a
// minute.
func TestRefusedDeadLettersComeBackAsPoison(t *testing.T) {
	sink := &idSink{poison: map[string]bool{}}
	c, clk, _ := loggedConsumer(sink)
	ctx := context.Background()
	for b := range 5 {
		c.Process(ctx, tenFresh(b))
	}
	var tail []consume.Message
	for b := range 40 {
		msgs := tenFresh(100 + b)
		sink.poison[msgs[0].ID] = true
		if rep := c.Process(ctx, msgs); len(rep.Poison) != 1 {
			t.Fatalf("one poison message in a healthy batch: dead-lettered %d, held %d; want 1 dead-lettered", len(rep.Poison), len(rep.Deferred))
		}
		m := msgs[0]
		m.ReceiveCount = 2
		tail = append(tail, m)
	}
	dead, held := 0, 0
	for len(tail) > 0 {
		clk.Advance(c.Breaker().Wait())
		batch := tail[:min(10, len(tail))]
		tail = tail[len(batch):]
		rep := c.Process(ctx, batch)
		dead += len(rep.Poison)
		held += len(rep.Deferred)
		for _, m := range rep.Deferred {
			m.ReceiveCount++
			tail = append(tail, m)
		}
		if dead+held > 400 {
			break
		}
	}
	if dead != 40 || held != 0 {
		t.Errorf("40 poison messages back after a refused dead-letter send: %d dead-lettered, %d held; want 40 dead-lettered, none held", dead, held)
	}
}
