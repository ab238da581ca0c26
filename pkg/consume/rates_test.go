package consume_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

func TestRateCacheReadsOncePerPeriod(t *testing.T) {
	clk := newFakeClock()
	store := memqueue.NewRates()
	store.Put(protocol.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now().Add(time.Hour)})
	c := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", Period: time.Second, SafeRate: 1}, store, consume.FixedPeers(4), clk, nil, nil)
	for range 10_000 { // 10 s of asks, every millisecond
		a := c.Allowed(context.Background())
		if a.Total != 100 || a.Share != 25 || a.Peers != 4 || a.Fallback {
			t.Fatalf("Allowed() = %+v; want total 100, share 25 of 4", a)
		}
		clk.Advance(time.Millisecond)
	}
	if got := store.Reads(); got != 10 {
		t.Errorf("reads over 10 s = %d; want 10 (one per period)", got)
	}
}

func TestRateCacheFallsBack(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		rate   *protocol.Rate
		err    error
		maxAge time.Duration
		want   float64
		fb     bool
	}{
		{name: "fresh", rate: &protocol.Rate{PerSecond: 40, WrittenAt: now, ExpiresAt: now.Add(time.Minute)}, want: 40},
		{name: "no expiry", rate: &protocol.Rate{PerSecond: 40}, want: 40},
		{name: "missing", want: 8, fb: true},
		{name: "expired", rate: &protocol.Rate{PerSecond: 40, ExpiresAt: now}, want: 8, fb: true},
		{name: "too old", rate: &protocol.Rate{PerSecond: 40, WrittenAt: now.Add(-10 * time.Minute)}, maxAge: 5 * time.Minute, want: 8, fb: true},
		{name: "negative", rate: &protocol.Rate{PerSecond: -1}, want: 8, fb: true},
		{name: "read error", rate: &protocol.Rate{PerSecond: 40}, err: errors.New("throttled"), want: 8, fb: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			store := memqueue.NewRates()
			if tt.rate != nil {
				r := *tt.rate
				r.Loop = "l"
				store.Put(r)
			}
			store.SetErr(tt.err)
			stats := &consume.Stats{}
			c := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 8, MaxAge: tt.maxAge}, store, nil, clk, nil, stats)
			a := c.Allowed(context.Background())
			if a.Total != tt.want || a.Fallback != tt.fb {
				t.Errorf("Allowed() = %v (fallback %v, %q); want %v (fallback %v)", a.Total, a.Fallback, a.Reason, tt.want, tt.fb)
			}
			wantFB := int64(0)
			if tt.fb {
				wantFB = 1
			}
			if got := stats.RateFallbacks.Load(); got != wantFB {
				t.Errorf("RateFallbacks = %d; want %d", got, wantFB)
			}
			if tt.fb && a.Reason == "" {
				t.Errorf("fallback without a reason")
			}
		})
	}
}

// TestRateChangeReachesEveryConsumerWithinOnePeriod: eight consumers whose
// caches were filled at different instants all pace at the new rate one
// cache period after the controller wrote it.
func TestRateChangeReachesEveryConsumerWithinOnePeriod(t *testing.T) {
	const n = 8
	period := time.Second
	clk := newFakeClock()
	store := memqueue.NewRates()
	store.Put(protocol.Rate{Loop: "l", PerSecond: 80})
	var consumers []*consume.Consumer
	for i := range n {
		rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", Period: period, SafeRate: 1}, store, consume.FixedPeers(n), clk, nil, nil)
		c := consume.New(consume.Config{BatchSize: 10}, rc, memqueue.NewSink(), clk, nil, nil)
		c.ReceiveSize(context.Background()) // fills the cache
		consumers = append(consumers, c)
		clk.Advance(period / n * time.Duration(i+1) / time.Duration(n)) // staggered
	}
	clk.Advance(period / 3)
	store.Put(protocol.Rate{Loop: "l", PerSecond: 800})
	changed := clk.Now()
	for step := time.Duration(0); step <= period; step += period / 20 {
		for _, c := range consumers {
			c.ReceiveSize(context.Background())
		}
		clk.Advance(period / 20)
	}
	if clk.Now().Sub(changed) > period+period/20 {
		t.Fatalf("test advanced %v; want about one period", clk.Now().Sub(changed))
	}
	for i, c := range consumers {
		if got := c.Pacer().Rate(); got != 100 {
			t.Errorf("consumer %d paces at %v/s one period after the change; want 100 (800/%d)", i, got, n)
		}
		if total, share, _ := c.Stats().AllowedRate(); total != 800 || share != 100 {
			t.Errorf("consumer %d stats allowed = %v, share %v; want 800, 100", i, total, share)
		}
	}
}

func TestRateCacheHandsOutWeightsOnEveryRead(t *testing.T) {
	clk := newFakeClock()
	store := memqueue.NewRates()
	w1 := map[string]float64{"http://a/": 0.25, "http://b/": 0.75}
	store.Put(protocol.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now().Add(time.Hour), Weights: w1})
	var got []map[string]float64
	c := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", Period: time.Second, SafeRate: 1,
		Weights: func(w map[string]float64) { got = append(got, w) }}, store, nil, clk, nil, nil)
	ctx := context.Background()
	for range 2000 { // 2 s of asks, every millisecond: two reads
		c.Allowed(ctx)
		clk.Advance(time.Millisecond)
	}
	if len(got) != 2 || !maps.Equal(got[0], w1) || !maps.Equal(got[1], w1) {
		t.Fatalf("weights handed out = %v; want %v twice (once per read, not per ask)", got, w1)
	}

	// New weights at the next read; none when RATE has none or is gone.
	w2 := map[string]float64{"http://a/": 0.5, "http://b/": 0.5}
	store.Put(protocol.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now().Add(time.Hour), Weights: w2})
	c.Allowed(ctx)
	store.Put(protocol.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now().Add(time.Hour)})
	clk.Advance(time.Second)
	c.Allowed(ctx)
	store.Put(protocol.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now(), Weights: w2})
	clk.Advance(time.Second)
	c.Allowed(ctx)
	if len(got) != 5 || !maps.Equal(got[2], w2) || got[3] != nil || got[4] != nil {
		t.Errorf("weights after edits = %v; want w2, then nil (no weights), then nil (expired RATE)", got[2:])
	}
}

func ExampleRateCache() {
	store := memqueue.NewRates()
	store.Put(protocol.Rate{Loop: "orders", PerSecond: 300})
	c := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 10}, store, consume.FixedPeers(3), consume.WallClock{}, nil, nil)
	a := c.Allowed(context.Background())
	fmt.Println(a.Total, a.Share, a.Fallback)
	store.Delete("orders")
	// Still cached: within one period nothing is read again.
	fmt.Println(c.Allowed(context.Background()).Total)
	// Output:
	// 300 100 false
	// 300
}

func ExampleCountStored() {
	res := []consume.Result{
		{Outcome: consume.Stored},
		{Outcome: consume.Permanent, Reason: "amount is not a number"},
		{Outcome: consume.Stored},
	}
	fmt.Println(consume.CountStored(res), "of", len(res), "stored")
	// Output: 2 of 3 stored
}

// TestRateCacheKeepsLastValidRateOnReadError: a failed read of RATE keeps
// the last RATE read while it is valid (a safe rate five times RATE would
// otherwise flood a saturated destination), and falls back to the safe
// rate only once that RATE expired.
func TestRateCacheKeepsLastValidRateOnReadError(t *testing.T) {
	clk := newFakeClock()
	store := memqueue.NewRates()
	store.Put(protocol.Rate{Loop: "l", PerSecond: 2, WrittenAt: clk.Now(), ExpiresAt: clk.Now().Add(10 * time.Second)})
	stats := &consume.Stats{}
	c := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", Period: time.Second, SafeRate: 10}, store, nil, clk, nil, stats)
	if a := c.Allowed(context.Background()); a.Total != 2 || a.Fallback {
		t.Fatalf("Allowed() = %+v; want RATE 2", a)
	}
	store.SetErr(errors.New("ProvisionedThroughputExceededException"))
	for s := 1; s < 10; s++ {
		clk.Advance(time.Second)
		if a := c.Allowed(context.Background()); a.Total != 2 || a.Fallback {
			t.Fatalf("%d s after the read, RATE unreadable: Allowed() = %v (fallback %v, %q); want the last valid RATE 2", s, a.Total, a.Fallback, a.Reason)
		}
	}
	clk.Advance(time.Second)
	if a := c.Allowed(context.Background()); a.Total != 10 || !a.Fallback {
		t.Errorf("after RATE expired, unreadable: Allowed() = %+v; want the safe rate 10", a)
	}
	if got := stats.RateFallbacks.Load(); got != 1 {
		t.Errorf("RateFallbacks = %d; want 1 (only after expiry)", got)
	}
}

// RATE's inner settings come with the rate read, and not with the safe
// rate: an expired RATE's settings are not in force.
func TestRateCacheInnerSettings(t *testing.T) {
	clk := newFakeClock()
	store := memqueue.NewRates()
	in := &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second}
	store.Put(protocol.Rate{Loop: "orders", PerSecond: 300, ExpiresAt: clk.Now().Add(time.Minute), Inner: in})
	c := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 10}, store, consume.FixedPeers(1), clk, nil, nil)
	if a := c.Allowed(context.Background()); a.Fallback || a.Inner == nil || *a.Inner != *in {
		t.Errorf("Allowed with RATE carrying inner settings = %+v; want them, not on fallback", a)
	}
	clk.Advance(2 * time.Minute)
	if a := c.Allowed(context.Background()); !a.Fallback || a.Inner != nil {
		t.Errorf("Allowed on an expired RATE = %+v; want the safe rate without inner settings", a)
	}
}

func ExampleAllowed() {
	store := memqueue.NewRates()
	store.Put(protocol.Rate{Loop: "orders", PerSecond: 300, Inner: &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second}})
	c := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 10}, store, consume.FixedPeers(3), consume.WallClock{}, nil, nil)
	a := c.Allowed(context.Background())
	// A Consumer without Config.Inner runs its inner loop with these.
	fmt.Println(a.Share, a.Inner.Tolerance, a.Inner.ReactionTime)
	// Output: 100 0.2 20s
}
