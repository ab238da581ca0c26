package consume_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

func batchOf(prefix string, n int) []consume.Message {
	msgs := make([]consume.Message, n)
	for i := range msgs {
		msgs[i] = consume.Message{ID: fmt.Sprintf("%s-%d", prefix, i), Body: []byte(`{"n":1}`)}
	}
	return msgs
}

// consumerAt is a consumer at rate on virtual time, storing in a memory
// sink.
func consumerAt(rate float64) (*consume.Consumer, *memqueue.Sink, *fakeClock, *memqueue.Rates) {
	clock := newFakeClock()
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "l", PerSecond: rate, WrittenAt: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 1}, rates, nil, clock, nil, nil)
	sink := memqueue.NewSink()
	return consume.New(consume.Config{}, rc, sink, clock, nil, nil), sink, clock, rates
}

// TestProcessNowStoresAheadOfTheRate: at 1 message/s with a second before
// the deadline, Process stores what fits and defers the rest, ProcessNow
// stores its whole batch at once; the slots it took are owed, so that the
// next Process defers all of its batch; at a rate of zero ProcessNow
// defers the batch, paused.
func TestProcessNowStoresAheadOfTheRate(t *testing.T) {
	c, _, clock, rates := consumerAt(1)
	run := func(now bool, prefix string) consume.Report {
		ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(time.Second))
		defer cancel()
		if now {
			return c.ProcessNow(ctx, batchOf(prefix, 10))
		}
		return c.Process(ctx, batchOf(prefix, 10))
	}
	first := run(false, "a") // spends the pacer's burst
	clock.Advance(3 * time.Second)
	paced := run(false, "b")
	ahead := run(true, "c")
	clock.Advance(5 * time.Second)
	after := run(false, "d")
	t.Logf("stored: %d, then %d paced, %d now, %d after 5 s", len(first.Stored), len(paced.Stored), len(ahead.Stored), len(after.Stored))
	if len(paced.Stored) == 0 || len(paced.Deferred) == 0 || len(ahead.Stored) != 10 || len(after.Stored) != 0 || len(after.Deferred) != 10 {
		t.Errorf("paced: stored %d, deferred %d (want some of each); stored %d now (want 10), %d 5 s after (want 0: the slots are owed)",
			len(paced.Stored), len(paced.Deferred), len(ahead.Stored), len(after.Stored))
	}
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 0, WrittenAt: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)})
	clock.Advance(time.Minute) // past the rate cache's period
	if rep := run(true, "e"); len(rep.Stored) != 0 || len(rep.Deferred) != 10 || !rep.Paused {
		t.Errorf("at rate 0: stored %d, deferred %d, paused %v; want 0, 10, paused", len(rep.Stored), len(rep.Deferred), rep.Paused)
	}
}

// TestProcessNowProbesAnOpenCircuit: with the circuit open, Process defers
// its batch untried; ProcessNow tries it, as the circuit's probe: failed,
// the circuit stays open; stored, it closes.
func TestProcessNowProbesAnOpenCircuit(t *testing.T) {
	c, sink, _, _ := consumerAt(1000)
	sink.SetDown(true)
	for i := 0; c.Breaker().State() != consume.CircuitOpen; i++ {
		if i == 10 {
			t.Fatal("the circuit never opened")
		}
		c.Process(context.Background(), batchOf(fmt.Sprintf("f%d", i), 10))
	}
	if rep := c.Process(context.Background(), batchOf("p", 10)); len(rep.Deferred) != 10 {
		t.Fatalf("Process with the circuit open: %d deferred; want 10, untried", len(rep.Deferred))
	}
	if rep := c.ProcessNow(context.Background(), batchOf("n", 2)); len(rep.Retry) != 2 || c.Breaker().State() != consume.CircuitOpen {
		t.Errorf("ProcessNow, destination down: %d to retry, circuit %v; want 2, open", len(rep.Retry), c.Breaker().State())
	}
	sink.SetDown(false)
	if rep := c.ProcessNow(context.Background(), batchOf("u", 2)); len(rep.Stored) != 2 || c.Breaker().State() != consume.CircuitClosed {
		t.Errorf("ProcessNow, destination up: %d stored, circuit %v; want 2, closed", len(rep.Stored), c.Breaker().State())
	}
}
