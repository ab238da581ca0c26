package consume_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/loop"
)

func TestRateCacheHandsOutWeightsOnEveryRead(t *testing.T) {
	clk := newFakeClock()
	store := memqueue.NewRates()
	w1 := map[string]float64{"http://a/": 0.25, "http://b/": 0.75}
	store.Put(loop.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now().Add(time.Hour), Weights: w1})
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
	store.Put(loop.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now().Add(time.Hour), Weights: w2})
	c.Allowed(ctx)
	store.Put(loop.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now().Add(time.Hour)})
	clk.Advance(time.Second)
	c.Allowed(ctx)
	store.Put(loop.Rate{Loop: "l", PerSecond: 100, ExpiresAt: clk.Now(), Weights: w2})
	clk.Advance(time.Second)
	c.Allowed(ctx)
	if len(got) != 5 || !maps.Equal(got[2], w2) || got[3] != nil || got[4] != nil {
		t.Errorf("weights after edits = %v; want w2, then nil (no weights), then nil (expired RATE)", got[2:])
	}
}
