package consume_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// resumingClock is virtual time that sets the loop's rate to 100 once it
// passes resumeAt (an operator's resume).
type resumingClock struct {
	*fakeClock
	resumeAt time.Time
	rates    *memqueue.Rates
	resumed  atomic.Bool
}

func (c *resumingClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := c.fakeClock.Sleep(ctx, d); err != nil {
		return err
	}
	if !c.Now().Before(c.resumeAt) && !c.resumed.Swap(true) {
		c.rates.Put(protocol.Rate{Loop: "l", PerSecond: 100, WrittenAt: c.Now(), ExpiresAt: c.Now().Add(time.Hour)})
	}
	return nil
}

// countingQueue counts the receives made while the loop is paused.
type countingQueue struct {
	*memqueue.Queue
	clock          *resumingClock
	pausedReceives atomic.Int64
}

func (q *countingQueue) Receive(ctx context.Context, n int) ([]consume.Message, error) {
	if !q.clock.resumed.Load() {
		q.pausedReceives.Add(1)
	}
	return q.Queue.Receive(ctx, n)
}

// TestRunReceivesNothingWhilePaused: at RATE 0 the worker's loop receives
// nothing (an SQS message it held would count a receive toward
// maxReceiveCount at every visibility timeout; a Kafka record would stop
// the partition), for a 30-minute pause, and drains everything once the
// rate is back.
func TestRunReceivesNothingWhilePaused(t *testing.T) {
	base := newFakeClock()
	rates := memqueue.NewRates()
	clk := &resumingClock{fakeClock: base, resumeAt: base.Now().Add(30 * time.Minute), rates: rates}
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 0, WrittenAt: clk.Now(), ExpiresAt: clk.Now().Add(time.Hour)})
	q := &countingQueue{Queue: memqueue.New(), clock: clk}
	for i := range 25 {
		q.Send(fmt.Appendf(nil, `{"i":%d}`, i))
	}
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 1}, rates, nil, clk, nil, nil)
	sink := memqueue.NewSink()
	c := consume.New(consume.Config{BatchSize: 10}, rc, sink, clk, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx, q) }()
	for deadline := time.Now().Add(20 * time.Second); sink.Len() < 25 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if n := q.pausedReceives.Load(); n != 0 {
		t.Errorf("%d receives during the 30-minute pause; want 0", n)
	}
	if _, inflight, acked, dead := q.Counts(); sink.Len() != 25 || acked != 25 || inflight != 0 || dead != 0 {
		t.Errorf("after the resume: stored %d, acked %d, in flight %d, dead %d; want all 25 stored and acked", sink.Len(), acked, inflight, dead)
	}
	if !clk.resumed.Load() {
		t.Errorf("the virtual clock never reached the resume: the consumer did not wait")
	}
}
