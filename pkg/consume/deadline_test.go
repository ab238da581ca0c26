package consume_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

func batch(n int) []consume.Message {
	out := make([]consume.Message, n)
	for i := range out {
		out[i] = consume.Message{ID: fmt.Sprintf("m%d", i), Body: []byte(`{}`)}
	}
	return out
}

// deadlineCtx is a context whose deadline is on the fake clock's time line
// (it never ends by itself: the fake clock does not move the real one).
type deadlineCtx struct {
	context.Context
	at time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.at, true }

// TestProcessNeverSleepsPastTheDeadline is the Lambda at a trickle: a share
// of 0.1 msg/s, a batch of 10 and 27 s left. It stores the part whose slot
// comes in time and defers the rest at once, ending before the deadline.
func TestProcessNeverSleepsPastTheDeadline(t *testing.T) {
	clk := newFakeClock()
	sink := memqueue.NewSink()
	c, _ := newConsumer(clk, 0.1, sink)
	c.Process(context.Background(), batch(10)) // spends the full bucket of one batch
	dl := clk.Now().Add(27 * time.Second)
	rep := c.Process(deadlineCtx{context.Background(), dl}, batch(10))
	if clk.Now().After(dl) {
		t.Errorf("Process ran %v past the deadline", clk.Now().Sub(dl))
	}
	if len(rep.Stored) == 0 || len(rep.Stored)+len(rep.Deferred) != 10 || len(rep.Retry) != 0 {
		t.Errorf("stored %d, deferred %d, retry %d; want some stored, the rest deferred", len(rep.Stored), len(rep.Deferred), len(rep.Retry))
	}
	if rep.DeferFor <= 0 {
		t.Errorf("stored %d; DeferFor = %v; want the time until the deferred have a slot", len(rep.Stored), rep.DeferFor)
	}
}

// TestProcessAtRateZeroReturnsAtOnce: a paused loop does not bill a Lambda
// to its deadline.
func TestProcessAtRateZeroReturnsAtOnce(t *testing.T) {
	clk := newFakeClock()
	sink := memqueue.NewSink()
	c, _ := newConsumer(clk, 0, sink)
	start := clk.Now()
	rep := c.Process(deadlineCtx{context.Background(), start.Add(30 * time.Second)}, batch(10))
	if clk.Now() != start || len(rep.Deferred) != 10 || !rep.Paused || sink.Len() != 0 {
		t.Errorf("at rate 0: slept %v, deferred %d, paused %v, stored %d; want 0s, 10, true, 0",
			clk.Now().Sub(start), len(rep.Deferred), rep.Paused, sink.Len())
	}
}

// deadlineSink records the deadline of the store's context.
type deadlineSink struct {
	deadline time.Time
	ok       bool
	took     time.Duration
	clk      *fakeClock
}

func (s *deadlineSink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	s.deadline, s.ok = ctx.Deadline()
	s.clk.Advance(s.took)
	res := make([]consume.Result, len(msgs))
	return res, nil
}

// TestStoreContextEndsByTheDeadline: the store's context ends by the
// caller's deadline, even though it outlives cancellation.
func TestStoreContextEndsByTheDeadline(t *testing.T) {
	clk := newFakeClock()
	s := &deadlineSink{clk: clk}
	c, _ := newConsumer(clk, 1000, s)
	dl := time.Now().Add(20 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	c.Process(ctx, batch(3))
	if !s.ok || s.deadline.After(dl) {
		t.Errorf("store context deadline %v (set %v); want by %v", s.deadline, s.ok, dl)
	}
}

// TestProcessReservesTheStoreTime: a sink that took 2 s per message makes
// the next batch store only what it can store before the deadline.
func TestProcessReservesTheStoreTime(t *testing.T) {
	clk := newFakeClock()
	s := &deadlineSink{clk: clk, took: 20 * time.Second} // 10 messages, 2 s each
	c, _ := newConsumer(clk, 1000, s)
	c.Process(deadlineCtx{context.Background(), clk.Now().Add(28 * time.Second)}, batch(10))
	s.took = 0
	rep := c.Process(deadlineCtx{context.Background(), clk.Now().Add(12 * time.Second)}, batch(10))
	if len(rep.Stored) > 5 || len(rep.Stored) == 0 || len(rep.Stored)+len(rep.Deferred) != 10 {
		t.Errorf("with 12 s left at 2 s per message: stored %d, deferred %d; want at most 5 stored, the rest deferred",
			len(rep.Stored), len(rep.Deferred))
	}
}

// countingSink fails every store while down and counts the calls.
type countingSink struct {
	down  atomic.Bool
	calls atomic.Int64
	inner *memqueue.Sink
	// done is called once all want messages are stored.
	want int
	done func()
}

func (s *countingSink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, fmt.Errorf("dial tcp: connection refused")
	}
	res, err := s.inner.Store(ctx, msgs)
	if s.inner.Len() >= s.want && s.done != nil {
		s.done()
	}
	return res, err
}

// stopAfter is a fake clock whose Sleep cancels the run once virtual time
// passes a limit.
type stopAfter struct {
	*fakeClock
	until  time.Time
	cancel context.CancelFunc
	onTime func(time.Time)
}

func (c *stopAfter) Sleep(ctx context.Context, d time.Duration) error {
	if c.onTime != nil {
		c.onTime(c.Now())
	}
	err := c.fakeClock.Sleep(ctx, d)
	if c.onTime != nil {
		c.onTime(c.Now())
	}
	if c.Now().After(c.until) {
		c.cancel()
	}
	return err
}

// TestRunBacksOffWhileTheDestinationIsDown: a 90 s outage costs a few
// batches and single-message probes, not a receive budget per message per
// second; the circuit opens, and everything is stored once it is back.
func TestRunBacksOffWhileTheDestinationIsDown(t *testing.T) {
	fc := newFakeClock()
	start := fc.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &countingSink{inner: memqueue.NewSink(), want: 200, done: cancel}
	sink.down.Store(true)
	var sawOpen atomic.Bool
	var c *consume.Consumer
	clk := &stopAfter{fakeClock: fc, until: start.Add(10 * time.Minute), cancel: cancel}
	clk.onTime = func(now time.Time) {
		if now.Sub(start) > 90*time.Second {
			sink.down.Store(false)
		}
		if c.Breaker().State() == consume.CircuitOpen {
			sawOpen.Store(true)
		}
	}
	c, _ = newConsumer(clk, 1000, sink)
	q := memqueue.New()
	for i := range 200 {
		q.Send(fmt.Appendf(nil, `{"i":%d}`, i))
	}
	if err := c.Run(ctx, q); err != nil {
		t.Fatal(err)
	}
	downCalls := sink.calls.Load() - int64(sink.inner.Len()+9)/10
	if downCalls > 15 || !sawOpen.Load() {
		t.Errorf("during a 90 s outage: %d failed stores, circuit seen open %v; want at most 15 and open", downCalls, sawOpen.Load())
	}
	if sink.inner.Len() != 200 {
		t.Errorf("stored %d after the outage; want 200", sink.inner.Len())
	}
}
