package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// BenchmarkInnerLoop compares one batch of 10 paced at a rate too high to
// wait for, with and without the inner loop: the inner loop's cost per
// batch against the pacer alone (report the ratio of the two in one run).
func BenchmarkInnerLoop(b *testing.B) {
	batch := make([]consume.Message, 10)
	for i := range batch {
		batch[i] = consume.Message{ID: "m", Body: []byte(`{"seq":1}`)}
	}
	for _, inner := range []bool{false, true} {
		name := "pacer"
		var cfg *consume.InnerConfig
		if inner {
			name, cfg = "pacer+inner", &consume.InnerConfig{}
		}
		b.Run(name, func(b *testing.B) {
			rates := memqueue.NewRates()
			rates.Put(protocol.Rate{Loop: "l", PerSecond: 1e12})
			rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l"}, rates, nil, consume.WallClock{}, nil, nil)
			c := consume.New(consume.Config{Inner: cfg}, rc, nullSink{}, consume.WallClock{}, nil, nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c.Process(ctx, batch)
			}
		})
	}
}

// BenchmarkInnerStep compares what the inner loop adds to a batch (one
// Pace and one Observe) with what the pacer does for it (one reservation
// of 10 messages), without the rest of Process: while it learns (inner)
// and while it cuts (inner-cutting: a learned reference, the latency twice
// it). make bench reports both as ratios to the reservation.
func BenchmarkInnerStep(b *testing.B) {
	clk := newFakeClock()
	b.Run("pacer", func(b *testing.B) {
		p := consume.NewPacer(clk, 1e12, 10)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Delay(10); err != nil {
				b.Fatal(err)
			}
			clk.Advance(time.Millisecond)
		}
	})
	// step runs one Pace and one Observe of l per iteration, at a latency
	// per message of per.
	step := func(l *consume.InnerLoop, per time.Duration) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				now := clk.Now()
				l.Pace(now, 1e4)
				l.Observe(consume.InnerSample{At: now, Messages: 10, PerMessage: per})
				clk.Advance(time.Millisecond)
			}
		}
	}
	b.Run("inner", step(consume.NewInnerLoop(consume.InnerConfig{}), 5*time.Millisecond))
	// A latency that never answers the cut would end it after Probe
	// (the fake clock runs a millisecond per iteration): the benchmark
	// measures the control law, so its probe never ends.
	cutting := consume.NewInnerLoop(consume.InnerConfig{Probe: 1000 * time.Hour})
	cutting.State.Ref, cutting.State.RefShare, cutting.State.Latency = 0.005, 1e4, 0.01
	b.Run("inner-cutting", step(cutting, 10*time.Millisecond))
	if cutting.Fraction() >= 1 {
		b.Fatalf("fraction %v: the inner loop does not cut", cutting.Fraction())
	}
}
