package consume_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
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

// downSink fails every store: the destination is down.
type downSink struct{}

func (downSink) Store(context.Context, []consume.Message) ([]consume.Result, error) {
	return nil, fmt.Errorf("connection refused")
}

// TestProcessRenewsTheLeaseWhileTheCircuitIsOpen: an SQS Lambda instance
// whose circuit is open hands every batch back at once, and its lease must
// stay live meanwhile: the controller tells an outage (leases at work,
// nothing stored) from an empty queue (no lease) by it, and holds the event
// source mapping off in an outage.
func TestProcessRenewsTheLeaseWhileTheCircuitIsOpen(t *testing.T) {
	clk := newFakeClock()
	peers := &countingPeers{Store: memstore.New()}
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 1000, ExpiresAt: clk.Now().Add(time.Hour)})
	stats := &consume.Stats{}
	lease := consume.NewLease(consume.LeaseConfig{Loop: "l", Every: 2 * time.Second, TTL: 10 * time.Second}, peers, stats, clk, nil)
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 1}, rates, lease, clk, nil, stats)
	c := consume.New(consume.Config{BatchSize: 10, Breaker: consume.BreakerConfig{Backoff: consume.Backoff{Base: time.Minute, Max: time.Hour}}}, rc, downSink{}, clk, nil, stats)
	for i := 0; c.Breaker().State() != consume.CircuitOpen; i++ {
		if i == 10 {
			t.Fatal("the circuit never opened on a destination that fails every store")
		}
		c.Process(context.Background(), batch(10))
	}
	before := peers.reports
	for range 5 {
		clk.Advance(3 * time.Second)
		if rep := c.Process(context.Background(), batch(10)); len(rep.Deferred) != 10 {
			t.Fatalf("open circuit: %d of 10 deferred; want all", len(rep.Deferred))
		}
	}
	if peers.reports-before < 5 {
		t.Errorf("%d lease refreshes over 5 batches 3 s apart with the circuit open; want one a batch (Every 2 s)", peers.reports-before)
	}
}
