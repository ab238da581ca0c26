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

// parkedClock never lets a sleep end before its context does: a consumer
// waiting for its pacing slot stays there until shutdown.
type parkedClock struct {
	*fakeClock
	parked chan struct{}
}

func (c *parkedClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case c.parked <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestRunShutdownReleasesHeldBatch: on shutdown (SIGTERM in the worker) a
// batch waiting for its pacing slot is released, not lost and not stored.
func TestRunShutdownReleasesHeldBatch(t *testing.T) {
	clk := &parkedClock{fakeClock: newFakeClock(), parked: make(chan struct{}, 1)}
	q := memqueue.New()
	for i := range 25 {
		q.Send(fmt.Appendf(nil, `{"i":%d}`, i))
	}
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 1})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 1}, rates, nil, clk, nil, nil)
	sink := memqueue.NewSink()
	c := consume.New(consume.Config{BatchSize: 10, MaxHold: 10 * time.Second}, rc, sink, clk, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx, q) }()
	select {
	case <-clk.parked: // the second batch waits for its slot
	case <-time.After(10 * time.Second):
		t.Fatal("consumer never waited for a pacing slot")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	ready, inflight, acked, dead := q.Counts()
	if inflight != 0 || dead != 0 || acked != sink.Len() || ready+acked != 25 {
		t.Errorf("after shutdown: ready %d, in flight %d, acked %d, dead %d, stored %d; want nothing in flight and ready+acked = 25",
			ready, inflight, acked, dead, sink.Len())
	}
	if sink.Len() == 25 {
		t.Errorf("everything stored at 1 msg/s with a parked clock; the test did not hold a batch")
	}
}
