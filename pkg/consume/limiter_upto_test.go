package consume_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fakeDeadline is a context whose deadline is on the fake clock: it never
// ends by itself, so that the test runs in virtual time.
type fakeDeadline struct {
	context.Context
	by time.Time
}

func (c fakeDeadline) Deadline() (time.Time, bool) { return c.by, true }

// TestLimiterWaitUpToTakesWhatFitsBeforeTheDeadline: with a deadline
// nearer than the slots of the whole batch, WaitUpTo lets through the
// part that fits, never sleeps past the deadline, and says how much that
// is; with room it takes all.
func TestLimiterWaitUpToTakesWhatFitsBeforeTheDeadline(t *testing.T) {
	clock := newFakeClock()
	r := rateAt{clock: clock, at: clock.Now(), after: 10}
	lim := consume.NewLimiter(r, "orders", consume.WithClock(clock))
	by := clock.Now().Add(500 * time.Millisecond)
	k, err := lim.WaitUpTo(fakeDeadline{context.Background(), by}, 20)
	if err != nil || k <= 0 || k >= 20 {
		t.Fatalf("WaitUpTo(20 messages at 10/s, 0.5 s) = %d, %v; want a part of the 20", k, err)
	}
	if clock.Now().After(by) {
		t.Errorf("WaitUpTo slept until %v past the deadline", clock.Now().Sub(by))
	}
	if k, err := lim.WaitUpTo(fakeDeadline{context.Background(), clock.Now().Add(time.Minute)}, 20); k != 20 || err != nil {
		t.Errorf("WaitUpTo(20 messages at 10/s, a minute) = %d, %v; want all 20", k, err)
	}
	if k, err := lim.WaitUpTo(context.Background(), 3); k != 3 || err != nil {
		t.Errorf("WaitUpTo(3) without a deadline = %d, %v; want 3 (Wait)", k, err)
	}
}

func TestLimiterWaitUpToPausedReturnsAtOnce(t *testing.T) {
	clock := newFakeClock()
	r := rateAt{clock: clock, at: clock.Now().Add(time.Hour), before: 0}
	lim := consume.NewLimiter(r, "orders", consume.WithClock(clock))
	start := clock.Now()
	k, err := lim.WaitUpTo(fakeDeadline{context.Background(), start.Add(time.Minute)}, 10)
	if k != 0 || !errors.Is(err, consume.ErrPaused) || !clock.Now().Equal(start) {
		t.Errorf("WaitUpTo on a paused loop = %d, %v after %v; want 0, ErrPaused at once", k, err, clock.Now().Sub(start))
	}
}

// reports records the leases written.
type reports struct {
	*memstore.Store
	mu   sync.Mutex
	last protocol.Peer
}

func (r *reports) ReportPeer(ctx context.Context, p protocol.Peer) error {
	r.mu.Lock()
	r.last = p
	r.mu.Unlock()
	return r.Store.ReportPeer(ctx, p)
}

// TestLimiterStoredReachesTheLease: what the caller reports with Stored is
// in the lease's next refresh (the controller's processed rate), and Close
// writes the final count with a lapsed lease.
func TestLimiterStoredReachesTheLease(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	store := &reports{Store: memstore.New()}
	_ = store.WriteRate(ctx, protocol.Rate{Loop: "orders", PerSecond: 1000, WrittenAt: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)})
	lim := consume.NewLimiter(store, "orders", consume.WithClock(clock), consume.WithLease(store, consume.LeaseConfig{Instance: "i-1"}))
	if err := lim.Wait(ctx, 10); err != nil {
		t.Fatal(err)
	}
	lim.Stored(10, 200*time.Millisecond)
	clock.Advance(consume.DefaultLeaseEvery)
	lim.Allowed(ctx)
	if p := store.last; p.Instance != "i-1" || p.Loop != "orders" || p.Stored != 10 || p.Batches != 1 || p.BatchMessages != 10 || p.Working != 200*time.Millisecond {
		t.Errorf("lease after Stored(10, 200ms) = %+v; want i-1 on orders with 10 stored in 1 batch of 200ms", p)
	}
	if err := lim.Close(ctx); err != nil || store.last.Live(clock.Now()) {
		t.Errorf("Close = %v, lease %+v; want a lapsed lease", err, store.last)
	}
}

// Pace your own consumer within a deadline (a Lambda's) and report what it
// stored, so that the controller counts it.
func ExampleLimiter_WaitUpTo() {
	ctx := context.Background()
	store := memstore.New() // production: ddbstore.New(dynamodb.NewFromConfig(cfg), "sluice")
	now := time.Now()
	_ = store.WriteRate(ctx, protocol.Rate{Loop: "orders", PerSecond: 1000, WrittenAt: now, ExpiresAt: now.Add(3 * time.Minute)})
	lim := consume.NewLimiter(store, "orders", consume.WithLease(store, consume.LeaseConfig{}))
	defer func() { _ = lim.Close(ctx) }()

	// Room before the deadline: the whole batch goes.
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	took, err := lim.WaitUpTo(dctx, 10)
	cancel()
	fmt.Println(took, err)
	lim.Stored(took, 0) // after storing them: the lease carries the count

	// Too little time for 1,000 at 1,000/s: only a part goes.
	dctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	took, err = lim.WaitUpTo(dctx, 1000)
	cancel()
	fmt.Println(took > 0 && took < 1000, err)
	fmt.Println(lim.Stats().Stored.Load(), lim.Allowed(ctx).Peers)
	// Output:
	// 10 <nil>
	// true <nil>
	// 10 1
}
