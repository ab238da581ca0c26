package consume_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testclock"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fleetRun drives one of eight consumers that stores a batch every 3.5 s,
// with its own latency per message base x own(at) and, when fleet is set,
// the loop's ratio across the consumers fleet(at) read at each store.
type fleetRun struct {
	l     *consume.InnerLoop
	t0    time.Time
	at    time.Duration
	share float64
}

const fleetEvery = 3500 * time.Millisecond

func (r *fleetRun) run(d time.Duration, own, fleet func(time.Duration) float64) (low float64, trips int) {
	low = math.Inf(1)
	was := r.l.State.Engaged
	for end := r.at + d; r.at < end; r.at += fleetEvery {
		now := r.t0.Add(r.at)
		if fleet != nil {
			r.l.Fleet(now, fleet(r.at), 8)
		}
		p := r.l.Pace(now, r.share)
		low = math.Min(low, p)
		y := float64(17*time.Millisecond) * own(r.at)
		r.l.Observe(consume.InnerSample{At: now, Messages: max(int(math.Round(p*fleetEvery.Seconds())), 1), PerMessage: time.Duration(y)})
		if r.l.State.Engaged && !was {
			trips++
		}
		was = r.l.State.Engaged
	}
	return low, trips
}

// swing is one consumer's latency as the batches of its peers beside it
// come and go: ±50 % over half a minute at a steady load, about ±27 %
// once filtered (on MariaDB each consumer's filtered latency swung ±25 %
// at a steady 30 % CPU).
func swing(at time.Duration) float64 { return 1 + 0.5*math.Sin(2*math.Pi*at.Seconds()/30) }

func learned(t *testing.T) *fleetRun {
	t.Helper()
	r := &fleetRun{l: consume.NewInnerLoop(consume.InnerConfig{}), t0: time.Unix(1_700_000_000, 0), share: 2.9}
	r.run(4*time.Minute, flat, nil)
	if r.l.State.Ref == 0 {
		t.Fatal("no reference after a settled share")
	}
	return r
}

// One consumer's own latency swings with its peers' batches at a steady
// load, and cuts on it withhold part of the share, which the outer loop
// answers with a higher rate. The fleet's mean does not swing: on it, the
// same consumer does not cut in the steady phase, and cuts within two
// stores when the whole fleet's latency rises 1.4 x.
func TestInnerLoopRegulatesOnTheFleet(t *testing.T) {
	alone := learned(t)
	if _, trips := alone.run(5*time.Minute, swing, nil); trips == 0 {
		t.Fatal("its own swinging latency tripped no cut: the case the fleet is for does not show")
	}
	r := learned(t)
	steady := func(time.Duration) float64 { return 1.02 }
	if low, trips := r.run(5*time.Minute, swing, steady); trips > 0 || low < r.share {
		t.Fatalf("%d cuts (lowest pace %.2f of %.2f) on a steady fleet of ratio 1.02; want none", trips, low, r.share)
	}
	burst := func(time.Duration) float64 { return 1.4 }
	own := func(at time.Duration) float64 { return 1.4 * swing(at) }
	low, trips := r.run(2*fleetEvery, own, burst)
	if trips != 1 || low >= 0.8*r.share {
		t.Fatalf("a fleet at 1.4 x: %d cuts, lowest pace %.2f of %.2f within two stores; want one cut of at least 20 %%", trips, low, r.share)
	}
}

// A consumer that has not learned a reference of its own (it started
// late) cuts with the fleet when the fleet's latency rises; without a
// fresh fleet reading of at least two leases it does nothing.
func TestInnerLoopWithoutAReferenceFollowsTheFleet(t *testing.T) {
	newRun := func() *fleetRun {
		return &fleetRun{l: consume.NewInnerLoop(consume.InnerConfig{}), t0: time.Unix(1_700_000_000, 0), share: 2.9}
	}
	high := func(time.Duration) float64 { return 1.5 }
	r := newRun()
	if low, _ := r.run(time.Minute, flat, high); low >= r.share || r.l.State.Ref != 0 {
		t.Fatalf("no reference, fleet at 1.5 x: lowest pace %.2f of %.2f, reference %v; want a cut and no reference learned", low, r.share, r.l.State.Ref)
	}
	r = newRun()
	if low, _ := r.run(time.Minute, flat, nil); low < r.share {
		t.Fatalf("no reference, no fleet: lowest pace %.2f of %.2f; want none cut", low, r.share)
	}
	r = newRun()
	stale := func(at time.Duration) float64 { return 1.5 }
	r.run(10*time.Second, flat, stale) // cutting on a fresh reading
	if r.l.Fraction() >= 1 {
		t.Fatal("no reference, fleet at 1.5 x: no cut")
	}
	r.run(time.Minute, flat, nil) // the readings stop: the last one ages
	if f := r.l.Fraction(); f < 1 {
		t.Fatalf("a fleet reading a minute old still cuts a consumer without a reference: fraction %.2f; want 1", f)
	}
	r = newRun()
	for i := range 10 {
		now := r.t0.Add(time.Duration(i) * fleetEvery)
		r.l.Fleet(now, 1.5, 1)
		r.l.Pace(now, r.share)
		r.l.Observe(consume.InnerSample{At: now, Messages: 10, PerMessage: 17 * time.Millisecond})
	}
	if f := r.l.Fraction(); f < 1 {
		t.Fatalf("a fleet of one lease cut to %.2f; want no cut (one consumer's latency is no mean)", f)
	}
}

// The lease reads the consumers' leases at each refresh while its
// consumer runs an inner loop, and keeps their latency ratio in Stats.
func TestLeaseReadsTheFleetsLatency(t *testing.T) {
	ctx := context.Background()
	clk := testclock.New(time.Unix(1_700_000_000, 0))
	store := memstore.New()
	for i, lat := range []time.Duration{20, 45} {
		p := protocol.Peer{Loop: "l", Instance: string(rune('a' + i)), ReportedAt: clk.Now(), ExpiresAt: clk.Now().Add(15 * time.Second),
			InnerLatency: lat * time.Millisecond, InnerReference: 30 * time.Millisecond}
		if err := store.ReportPeer(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	var stats consume.Stats
	lease := consume.NewLease(consume.LeaseConfig{Loop: "l"}, store, &stats, clk, nil)
	if _, err := lease.Live(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, at := stats.Fleet(); !at.IsZero() {
		t.Fatal("the lease read the fleet for a consumer that runs no inner loop")
	}
	stats.InnerLatency.Store(int64(30 * time.Millisecond))
	stats.InnerReference.Store(int64(30 * time.Millisecond))
	clk.Advance(consume.DefaultLeaseEvery)
	if _, err := lease.Live(ctx); err != nil {
		t.Fatal(err)
	}
	ratio, n, at := stats.Fleet()
	want := math.Cbrt(20.0 / 30 * 45.0 / 30 * 1) // its own lease (30 of 30) and the two peers'
	if n != 3 || math.Abs(ratio-want) > 1e-9 || !at.Equal(clk.Now()) {
		t.Fatalf("fleet %v over %d leases at %v; want %v over 3 at %v", ratio, n, at, want, clk.Now())
	}
}

// A consumer whose own latency swings with its peers' batches learns its
// reference once the share has held for Settle: the window of a first
// reference is judged by the latency filtered over half a minute, not by
// the filter the cut uses (judged by that one, it restarted at every
// swing and no reference was learned in 20 minutes). A burst still
// restarts it: TestInnerLoopLearnsNoReferenceInABurst.
func TestInnerLoopLearnsThroughItsPeersSwing(t *testing.T) {
	r := &fleetRun{l: consume.NewInnerLoop(consume.InnerConfig{}), t0: time.Unix(1_700_000_000, 0), share: 2.9}
	r.run(4*time.Minute, swing, nil)
	if ref := r.l.State.Ref; math.Abs(ref-0.017) > 0.017*0.1 {
		t.Fatalf("reference %.1f ms after 4 minutes at a steady share with a swinging latency (mean 17 ms); want about 17", ref*1e3)
	}
}
