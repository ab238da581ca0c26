package consume_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// queueingSink takes store time on the fake clock: 2 ms / (1 - u) per
// message, u being the others' utilization plus the consumer's pace over
// the destination's capacity.
type queueingSink struct {
	clk    *fakeClock
	others float64
	pace   func() float64
}

func (s *queueingSink) Store(_ context.Context, m []consume.Message) ([]consume.Result, error) {
	u := math.Min(0.99, s.others+s.pace()/250)
	s.clk.Advance(time.Duration(len(m)) * time.Duration(float64(2*time.Millisecond)/(1-u)))
	return make([]consume.Result, len(m)), nil
}

// newInnerRig is a Consumer (batches of 10, RATE 100 msg/s, inner as
// Config.Inner) storing into a queueing sink at 0.3 others' load, and run,
// which processes batches for d of fake time and returns the lowest pace.
func newInnerRig(t *testing.T, inner *consume.InnerConfig) (*consume.Consumer, *queueingSink, *memqueue.Rates, *fakeClock, func(time.Duration) float64) {
	t.Helper()
	clk := newFakeClock()
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 100})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l"}, rates, nil, clk, nil, nil)
	sink := &queueingSink{clk: clk, others: 0.3}
	c := consume.New(consume.Config{BatchSize: 10, Inner: inner}, rc, sink, clk, nil, nil)
	sink.pace = c.Pacer().Rate
	batch := msgs(`{"a":1}`, `{"a":2}`, `{"a":3}`, `{"a":4}`, `{"a":5}`, `{"a":6}`, `{"a":7}`, `{"a":8}`, `{"a":9}`, `{"a":10}`)
	run := func(d time.Duration) (low float64) {
		low = math.Inf(1)
		for end := clk.Now().Add(d); clk.Now().Before(end); {
			if rep := c.Process(context.Background(), batch); len(rep.Stored) != len(batch) {
				t.Fatalf("stored %d of %d", len(rep.Stored), len(batch))
			}
			low = math.Min(low, c.Pacer().Rate())
		}
		return low
	}
	return c, sink, rates, clk, run
}

// TestConsumerInnerLoopCutsThePace runs a Consumer with its inner loop on a
// destination that slows down under another tenant's load: its pacer falls
// below the share within seconds and returns to it once the load is gone.
func TestConsumerInnerLoopCutsThePace(t *testing.T) {
	c, sink, _, _, run := newInnerRig(t, &consume.InnerConfig{})
	if low := run(4 * time.Minute); low != 100 {
		t.Fatalf("pace fell to %v without a disturbance; want the share 100", low)
	}
	if l, ok := c.InnerLoop(); !ok || l.State.Ref == 0 {
		t.Fatalf("inner loop %+v, %v: want a learned reference", l.State, ok)
	}
	sink.others = 0.5
	if low := run(20 * time.Second); low > 80 {
		t.Errorf("lowest pace %v in 20 s of a slower destination; want a cut below 80", low)
	}
	sink.others = 0.3
	run(2 * time.Minute)
	if r := c.Pacer().Rate(); r != 100 {
		t.Errorf("pace %v after the load went; want the share 100", r)
	}
}

// TestConsumerInnerLoopFollowsRate runs a Consumer without Config.Inner: it
// runs the inner loop only while RATE carries its settings (the loop's
// PARAMS inner_loop), takes new settings without forgetting what it
// learned, and lets go of its cut at once when RATE stops carrying them.
func TestConsumerInnerLoopFollowsRate(t *testing.T) {
	c, sink, rates, clk, run := newInnerRig(t, nil)
	run(4 * time.Minute)
	sink.others = 0.5
	if low := run(20 * time.Second); low != 100 {
		t.Errorf("RATE without inner settings: pace fell to %v under a slower destination; want the share 100", low)
	}
	if _, on := c.InnerLoop(); on {
		t.Errorf("RATE without inner settings: the inner loop runs; want none")
	}

	sink.others = 0.3
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 100, Inner: &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second}})
	if low := run(4 * time.Minute); low != 100 {
		t.Fatalf("RATE with inner settings: pace fell to %v without a disturbance; want the share 100", low)
	}
	learned, on := c.InnerLoop()
	if !on || learned.State.Ref == 0 || learned.Config.Tolerance != 0.2 {
		t.Fatalf("RATE with inner settings: inner loop %+v, %v; want it on, tolerance 0.2, with a learned reference", learned, on)
	}
	// New settings keep the reference: the cut comes at once, not after
	// another Settle of learning.
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 100, Inner: &protocol.InnerSettings{Tolerance: 0.25, ReactionTime: 30 * time.Second}})
	run(2 * time.Second)
	if l, on := c.InnerLoop(); !on || l.Config.Tolerance != 0.25 || l.Config.ReactionTime != 30*time.Second || l.State.Ref == 0 {
		t.Fatalf("new inner settings: inner loop %+v, %v; want tolerance 0.25, reaction time 30s, the reference kept", l, on)
	}
	sink.others = 0.5
	if low := run(20 * time.Second); low > 80 {
		t.Errorf("RATE with inner settings: lowest pace %v in 20 s of a slower destination; want a cut below 80", low)
	}

	// A RATE without the settings stops the inner loop in the middle of a
	// cut: the pace is the share again at once.
	sink.others = 0.3
	run(4 * time.Minute)
	sink.others = 0.5
	for end := clk.Now().Add(20 * time.Second); c.Pacer().Rate() >= 100 && clk.Now().Before(end); {
		run(100 * time.Millisecond)
	}
	if r := c.Pacer().Rate(); r >= 100 {
		t.Fatalf("pace %v after 20 s of a slower destination; want a cut", r)
	}
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 100})
	run(2 * time.Second)
	if _, on := c.InnerLoop(); on {
		t.Errorf("RATE without inner settings again: the inner loop still runs; want none")
	}
	if low := run(5 * time.Second); low != 100 {
		t.Errorf("RATE without inner settings again: pace %v under the slower destination; want the share 100 (no cut)", low)
	}
}

// TestConsumerInnerLoopSettlesAsRateSays runs a Consumer whose RATE carries
// a Settle of 10 s (a loop that ticks every few seconds): it learns its
// reference after that, not after the default 3 minutes.
func TestConsumerInnerLoopSettlesAsRateSays(t *testing.T) {
	c, _, rates, _, run := newInnerRig(t, nil)
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 100,
		Inner: &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second, Settle: 10 * time.Second}})
	run(20 * time.Second)
	l, on := c.InnerLoop()
	if !on || l.Config.Settle != 10*time.Second || l.State.Ref == 0 {
		t.Fatalf("after 20 s of RATE with settle 10s: inner loop %+v, %v; want it on, settle 10s, a learned reference", l, on)
	}
}

// TestConsumerInnerLoopLearnsOnlyWhenRateSaysSettled runs a Consumer whose
// RATE says the loop is not settled (the controller's datapoint away from
// its setpoint: a start-up ramp, a burst it has seen): however steady the
// share, it learns no reference; once RATE says settled, it learns after
// Settle.
func TestConsumerInnerLoopLearnsOnlyWhenRateSaysSettled(t *testing.T) {
	c, _, rates, _, run := newInnerRig(t, nil)
	in := protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second, Settle: 10 * time.Second, Unsettled: true}
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 100, Inner: &in})
	run(time.Minute)
	if l, on := c.InnerLoop(); !on || l.State.Ref != 0 {
		t.Fatalf("after a minute of RATE unsettled: inner loop on %v, reference %v; want on, none learned", on, l.State.Ref)
	}
	in.Unsettled = false
	rates.Put(protocol.Rate{Loop: "l", PerSecond: 100, Inner: &in})
	run(5 * time.Second)
	if l, _ := c.InnerLoop(); l.State.Ref != 0 {
		t.Fatalf("5 s after RATE settled: reference %v; want none before Settle (10 s)", l.State.Ref)
	}
	run(20 * time.Second)
	if l, _ := c.InnerLoop(); l.State.Ref == 0 {
		t.Errorf("25 s after RATE settled: no reference; want one learned after Settle")
	}
}

// lastPeer is a PeerStore that keeps the last lease reported.
type lastPeer struct{ p protocol.Peer }

func (s *lastPeer) ReportPeer(_ context.Context, p protocol.Peer) error { s.p = p; return nil }
func (s *lastPeer) LivePeers(context.Context, string, time.Time) (int, error) {
	return 1, nil
}

// TestLeaseCarriesTheInnerLoop: the lease of a consumer whose inner loop
// runs reports its filtered store latency per message and, once learned,
// its reference (the dashboard charts them); without an inner loop, none.
func TestLeaseCarriesTheInnerLoop(t *testing.T) {
	for _, on := range []bool{false, true} {
		var cfg *consume.InnerConfig
		if on {
			cfg = &consume.InnerConfig{}
		}
		c, _, _, clk, run := newInnerRig(t, cfg)
		store := &lastPeer{}
		lease := consume.NewLease(consume.LeaseConfig{Loop: "l"}, store, c.Stats(), clk, nil)
		run(4 * time.Minute)
		if _, err := lease.Live(context.Background()); err != nil {
			t.Fatal(err)
		}
		l, _ := c.InnerLoop()
		p := store.p
		switch {
		case !on && (p.InnerLatency != 0 || p.InnerReference != 0):
			t.Errorf("without an inner loop the lease carries latency %v, reference %v; want none", p.InnerLatency, p.InnerReference)
		case on && (p.InnerLatency <= 0 || p.InnerReference <= 0):
			t.Errorf("with a learned inner loop the lease carries latency %v, reference %v; want both", p.InnerLatency, p.InnerReference)
		case on && math.Abs(p.InnerReference.Seconds()-l.State.Ref) > 1e-6:
			t.Errorf("lease reference %v; want the inner loop's %vs", p.InnerReference, l.State.Ref)
		}
	}
}
