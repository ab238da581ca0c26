package consume_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// rateAt is a RATE that changes at a time: before it, before; from it, after.
type rateAt struct {
	clock         *fakeClock
	at            time.Time
	before, after float64
}

func (r rateAt) ReadRate(_ context.Context, id string) (protocol.Rate, error) {
	now := r.clock.Now()
	v := r.before
	if !now.Before(r.at) {
		v = r.after
	}
	return protocol.Rate{Loop: id, PerSecond: v, WrittenAt: now, ExpiresAt: now.Add(time.Minute)}, nil
}

// waited makes batches Waits of batch messages and returns how long they
// took on clock.
func waited(t *testing.T, lim *consume.Limiter, clock *fakeClock, batches, batch int) time.Duration {
	t.Helper()
	start := clock.Now()
	for range batches {
		if err := lim.Wait(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	return clock.Now().Sub(start)
}

func TestLimiterPacesAtTheShare(t *testing.T) {
	clock := newFakeClock()
	r := rateAt{clock: clock, at: clock.Now(), after: 400}
	lim := consume.NewLimiter(r, "orders", consume.WithClock(clock), consume.WithPeers(consume.FixedPeers(4)))
	// 210 messages at a share of 100/s (the bucket starts empty): 2.1 s,
	// less at most one batch.
	if got := waited(t, lim, clock, 21, 10); got < 2*time.Second || got > 2100*time.Millisecond {
		t.Errorf("210 messages at a share of 100/s took %v; want 2s to 2.1s", got)
	}
}

func TestLimiterWaitsOutAPausedLoop(t *testing.T) {
	clock := newFakeClock()
	r := rateAt{clock: clock, at: clock.Now().Add(5 * time.Second), before: 0, after: 50}
	lim := consume.NewLimiter(r, "orders", consume.WithClock(clock))
	if got := waited(t, lim, clock, 1, 1); got < 5*time.Second || got > 6*time.Second {
		t.Errorf("Wait returned after %v; want once the rate rose at 5s (within a rate period)", got)
	}
}

func TestLimiterWithDeadlineReturnsAtOnceWhenPaused(t *testing.T) {
	clock := newFakeClock()
	r := rateAt{clock: clock, at: clock.Now().Add(time.Hour), before: 0}
	lim := consume.NewLimiter(r, "orders", consume.WithClock(clock))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Minute))
	defer cancel()
	start := clock.Now()
	if err := lim.Wait(ctx, 1); !errors.Is(err, consume.ErrPaused) {
		t.Fatalf("Wait = %v; want ErrPaused", err)
	}
	if got := clock.Now().Sub(start); got != 0 {
		t.Errorf("Wait slept %v; want 0", got)
	}
}

func TestLimiterFallsBackToTheSafeRate(t *testing.T) {
	clock := newFakeClock()
	lim := consume.NewLimiter(memstore.New(), "orders", consume.WithClock(clock), consume.WithSafeRate(20))
	a := lim.Allowed(context.Background())
	if !a.Fallback || a.Share != 20 {
		t.Errorf("Allowed() = %+v; want the safe rate 20 as a fallback", a)
	}
}

// Pace your own consumer by a loop's allowed rate: one Wait per batch.
func ExampleLimiter() {
	ctx := context.Background()
	clock := newFakeClock() // production: leave WithClock out (the wall clock)
	store := memstore.New() // production: ddbstore.New(dynamodb.NewFromConfig(cfg), "sluice")
	_ = store.WriteRate(ctx, protocol.Rate{Loop: "orders", PerSecond: 50, WrittenAt: clock.Now(), ExpiresAt: clock.Now().Add(3 * time.Minute)})

	lim := consume.NewLimiter(store, "orders", consume.WithClock(clock))
	start := clock.Now()
	for range 10 {
		batch := 10 // receive up to 10 messages from your queue
		if err := lim.Wait(ctx, batch); err != nil {
			return
		}
		// store the batch in your destination, then acknowledge it
	}
	fmt.Printf("100 messages at 50/s in %v\n", clock.Now().Sub(start))
	// Output: 100 messages at 50/s in 1.98s
}
