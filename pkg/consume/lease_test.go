package consume_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// countingPeers is a PeerStore over memstore that counts its calls and can
// fail.
type countingPeers struct {
	*memstore.Store
	reports, counts int
	err             error
}

func (c *countingPeers) ReportPeer(ctx context.Context, p protocol.Peer) error {
	c.reports++
	if c.err != nil {
		return c.err
	}
	return c.Store.ReportPeer(ctx, p)
}

func (c *countingPeers) LivePeers(ctx context.Context, id string, now time.Time) (int, error) {
	c.counts++
	if c.err != nil {
		return 0, c.err
	}
	return c.Store.LivePeers(ctx, id, now)
}

func TestLeaseSharesByLivePeers(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	store := &countingPeers{Store: memstore.New()}
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 1200, ExpiresAt: clk.Now().Add(time.Hour)})
	cfg := consume.LeaseConfig{Loop: "l", Every: 2 * time.Second, TTL: 10 * time.Second, Fallback: 8}
	var caches []*consume.RateCache
	var leases []*consume.Lease
	for range 3 {
		stats := &consume.Stats{}
		l := consume.NewLease(cfg, store, stats, clk, nil)
		leases = append(leases, l)
		caches = append(caches, consume.NewRateCache(consume.RateCacheConfig{Loop: "l"}, rates, l, clk, nil, stats))
	}
	share := func(i int) float64 { return caches[i].Allowed(ctx).Share }
	// The first instance to read sees itself only; within one lease
	// period every instance sees all three.
	if got := share(0); got != 1200 {
		t.Errorf("first instance's share = %v; want 1200 (alone)", got)
	}
	share(1)
	share(2)
	clk.Advance(2 * time.Second)
	for i := range 3 {
		if got := share(i); got != 400 {
			t.Errorf("instance %d's share = %v; want 400 (1200 / 3 live)", i, got)
		}
	}
	// One stops cleanly, one disappears: the lapsed lease stops counting
	// within its TTL.
	if err := leases[2].Close(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if got := share(0); got != 600 {
		t.Errorf("share after one instance closed = %v; want 600", got)
	}
	for range 6 { // instance 1 vanishes: only instance 0 refreshes
		clk.Advance(2 * time.Second)
		share(0)
	}
	if got := share(0); got != 1200 {
		t.Errorf("share after instance 1's lease lapsed = %v; want 1200", got)
	}
	// One refresh (a write and a count) per period, not per read.
	before := store.reports
	for range 10_000 {
		share(0)
		clk.Advance(time.Millisecond)
	}
	if n := store.reports - before; n < 4 || n > 5 {
		t.Errorf("lease writes over 10 s of reads every millisecond = %d; want 4 or 5 (one per 2 s)", n)
	}
}

func TestLeaseReportsTheStoredAndBatchCounts(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	store := memstore.New()
	stats := &consume.Stats{}
	l := consume.NewLease(consume.LeaseConfig{Loop: "l", Instance: "i-1"}, store, stats, clk, nil)
	stats.Stored.Add(250)
	stats.AddBatch(10, 500*time.Millisecond)
	stats.AddBatch(5, 250*time.Millisecond)
	if err := store.WriteParams(ctx, "l", map[string]any{"setpoint": 70.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Live(ctx); err != nil {
		t.Fatal(err)
	}
	snaps, err := store.LoadLoops(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []protocol.Peer
	for _, s := range snaps {
		if s.Loop == "l" {
			got = s.Peers
		}
	}
	batches := protocol.BatchCount{Batches: 2, Messages: 15, Working: 750 * time.Millisecond}
	if len(got) != 1 || got[0].Instance != "i-1" || got[0].Stored != 250 || !got[0].Live(clk.Now()) || got[0].BatchCount() != batches {
		t.Errorf("peers = %+v; want i-1's live lease with 250 stored and the batch counts %+v", got, batches)
	}
}

func TestLeaseFailureKeepsTheFallbackCount(t *testing.T) {
	clk := newFakeClock()
	store := &countingPeers{Store: memstore.New(), err: errors.New("throttled")}
	l := consume.NewLease(consume.LeaseConfig{Loop: "l", Fallback: 8}, store, &consume.Stats{}, clk, nil)
	if n, err := l.Live(context.Background()); n != 8 || err != nil {
		t.Errorf("Live with a failing store = %d, %v; want the fallback 8", n, err)
	}
}

func TestLeaseOrFixed(t *testing.T) {
	clk := newFakeClock()
	if p := consume.LeaseOrFixed(false, "l", 4, memstore.New(), &consume.Stats{}, clk, nil); p != consume.FixedPeers(4) {
		t.Errorf("LeaseOrFixed(report off) = %v; want FixedPeers(4)", p)
	}
	if _, ok := consume.LeaseOrFixed(true, "l", 4, memstore.New(), &consume.Stats{}, clk, nil).(*consume.Lease); !ok {
		t.Error("LeaseOrFixed(report on) is not a Lease")
	}
	for v, want := range map[string]bool{"": true, "on": true, "off": false} {
		if got, err := consume.ParseReport(v); got != want || err != nil {
			t.Errorf("ParseReport(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	if _, err := consume.ParseReport("yes"); err == nil {
		t.Error(`ParseReport("yes"): no error`)
	}
}

func ExampleLease() {
	ctx := context.Background()
	store := memstore.New() // ddbstore.Store in production
	_ = store.WriteRate(ctx, protocol.Rate{Loop: "orders", PerSecond: 300})
	// Two consumer instances of the loop, each with its lease.
	var caches []*consume.RateCache
	for range 2 {
		stats := &consume.Stats{}
		lease := consume.NewLease(consume.LeaseConfig{Loop: "orders"}, store, stats, consume.WallClock{}, nil)
		caches = append(caches, consume.NewRateCache(consume.RateCacheConfig{Loop: "orders"}, store, lease, consume.WallClock{}, nil, stats))
	}
	caches[0].Allowed(ctx) // the first lease: alone so far
	a := caches[1].Allowed(ctx)
	fmt.Println(a.Total, a.Peers, a.Share)
	// Output:
	// 300 2 150
}

// A lease refreshes at least twice per live-count bucket, however long
// Every is set: an instance that skipped a bucket would drop out of the
// others' count, and they would take its share too.
func TestLeaseRefreshesOncePerLiveBucket(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	store := &countingPeers{Store: memstore.New()}
	l := consume.NewLease(consume.LeaseConfig{Loop: "l", Every: time.Minute}, store, &consume.Stats{}, clk, nil)
	_, _ = l.Live(ctx)
	clk.Advance(protocol.LiveBucket / 2)
	_, _ = l.Live(ctx)
	if store.reports != 2 {
		t.Errorf("a lease with Every 1m refreshed %d times in half a live bucket (%v); want 2", store.reports, protocol.LiveBucket/2)
	}
}
