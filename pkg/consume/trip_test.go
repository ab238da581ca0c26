package consume_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// A destination at a 30 % CPU setpoint that queues like one server is
// 1/(1-0.35) / (1/(1-0.3)) = 1.077 times slower at setpoint + 5: a rise
// the default tolerance (0.2) lets pass until the CPU stands near 42 %.
// A trip of 0.07 cuts on the fleet's 1.1 within two stores, while the
// share's steadiness is still judged by the tolerance: a total that moves
// by 15 %, as the outer loop's does between ticks on a noisy plant, keeps
// the reference in force. The same trip as the tolerance (0.07 for both)
// suspends it.
func TestInnerLoopTripsBelowItsTolerance(t *testing.T) {
	newRun := func(cfg consume.InnerConfig) *fleetRun {
		r := &fleetRun{l: consume.NewInnerLoop(cfg), t0: time.Unix(1_700_000_000, 0), share: 2.9}
		r.run(4*time.Minute, flat, nil)
		if r.l.State.Ref == 0 {
			t.Fatalf("%+v: no reference after a settled share", cfg)
		}
		return r
	}
	rise := func(time.Duration) float64 { return 1.1 }
	steady := func(time.Duration) float64 { return 1.03 }

	r := newRun(consume.InnerConfig{})
	if low, trips := r.run(time.Minute, flat, rise); trips > 0 || low < r.share {
		t.Fatalf("default tolerance, fleet at 1.1 x: %d cuts (lowest pace %.2f of %.2f); want none", trips, low, r.share)
	}

	r = newRun(consume.InnerConfig{Trip: 0.07})
	if low, trips := r.run(time.Minute, flat, steady); trips > 0 || low < r.share {
		t.Fatalf("trip 0.07, steady fleet at 1.03 x: %d cuts (lowest pace %.2f of %.2f); want none", trips, low, r.share)
	}
	if low, trips := r.run(2*fleetEvery, flat, rise); trips != 1 || low >= 0.9*r.share {
		t.Fatalf("trip 0.07, fleet at 1.1 x: %d cuts, lowest pace %.2f of %.2f within two stores; want one cut of at least 10 %%", trips, low, r.share)
	}

	for _, c := range []struct {
		cfg       consume.InnerConfig
		suspended bool
	}{{consume.InnerConfig{Trip: 0.07}, false}, {consume.InnerConfig{Tolerance: 0.07}, true}} {
		r := newRun(c.cfg)
		for i := range 6 { // the outer loop's total moves by 15 % from tick to tick
			total := r.share * (1 + 0.15*float64(i%2))
			now := r.t0.Add(r.at)
			r.l.PaceShare(now, r.share, total)
			r.l.Observe(consume.InnerSample{At: now, Messages: 10, PerMessage: 17 * time.Millisecond})
			r.at += fleetEvery
		}
		if r.l.State.Suspended != c.suspended {
			t.Errorf("%+v: reference suspended %v after a total that moved by 15 %%; want %v", c.cfg, r.l.State.Suspended, c.suspended)
		}
	}
}
