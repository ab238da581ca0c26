package stepdemo_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dashboard/stepdemo"
)

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

func steps(t *testing.T, d *stepdemo.Demo, n int) []dashboard.Point {
	t.Helper()
	ctx := context.Background()
	for range n {
		if err := d.Step(ctx); err != nil {
			t.Fatalf("Step = %v", err)
		}
	}
	ps, err := d.History().Last(ctx, stepdemo.LoopID, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != n {
		t.Fatalf("%d steps left %d history points; want %d", n, len(ps), n)
	}
	return ps
}

func newDemo(t *testing.T) *stepdemo.Demo {
	t.Helper()
	d, err := stepdemo.New(t0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func edit(t *testing.T, d *stepdemo.Demo, change dashboard.Params) {
	t.Helper()
	ctx := context.Background()
	cur, err := d.Params().Params(ctx, stepdemo.LoopID)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range change {
		cur.Params[k] = v
	}
	if err := d.Params().Validate(stepdemo.LoopID, cur.Params); err != nil {
		t.Fatalf("edit %v refused: %v", change, err)
	}
	if err := d.Params().SetParams(ctx, stepdemo.LoopID, cur.Params); err != nil {
		t.Fatal(err)
	}
}

func meanAbsError(ps []dashboard.Point) float64 {
	var sum float64
	var n int
	for _, p := range ps {
		if !math.IsNaN(p.Measured) {
			sum += math.Abs(p.Measured - p.Setpoint)
			n++
		}
	}
	return sum / float64(n)
}

func TestDemoHoldsSetpointThroughDisturbanceAndOutage(t *testing.T) {
	ps := steps(t, newDemo(t), 150) // one cycle
	if e := meanAbsError(ps[20:60]); e > 1.5 {
		t.Errorf("mean |CPU - setpoint| over ticks 20-59 = %.2f points; want <= 1.5", e)
	}
	// the +20-point disturbance (minutes 60-100) forces the rate down
	if r := ps[80].Rate; r > 90 {
		t.Errorf("rate during the disturbance = %.0f msg/s; want <= 90 (120 less 20 points / 0.5)", r)
	}
	if e := meanAbsError(ps[70:100]); e > 1.5 {
		t.Errorf("mean |CPU - setpoint| over ticks 70-99 (disturbed) = %.2f; want <= 1.5", e)
	}
	// the metric outage (minutes 120-127) is stale, with the rate held
	var stale int
	held := ps[118].Rate // the rate of the last tick before the outage
	for i := 118; i < 128 && !ps[i].Stale; i++ {
		held = ps[i].Rate
	}
	for _, p := range ps[119:129] {
		if p.Stale {
			stale++
			if !math.IsNaN(p.Measured) || !math.IsNaN(p.I) {
				t.Errorf("stale point at %v has measured %v, I %v; want NaN (no measurement, integrator frozen)", p.T, p.Measured, p.I)
			}
			if math.Abs(p.Rate-held) > 1e-6 {
				t.Errorf("rate while stale = %v; want it held at %v", p.Rate, held)
			}
		}
	}
	if stale < 5 {
		t.Errorf("%d stale ticks during the 7-minute outage; want at least 5", stale)
	}
	// consumers run, during each tick period, at the rate written by the
	// tick before (plus the pacer's burst of one batch per period)
	for i, p := range ps[1:] {
		if limit := math.Max(ps[i].Rate, 20) + 1; p.Depth < 0 || math.IsNaN(p.Consumed) || p.Consumed > limit {
			t.Fatalf("point %+v: consumed must be known, within the rate in force %v, depth >= 0", p, limit)
		}
	}
}

func TestDemoEdits(t *testing.T) {
	tests := []struct {
		name   string
		change dashboard.Params
		check  func(t *testing.T, ps []dashboard.Point)
	}{
		{"setpoint 50", dashboard.Params{"setpoint": 50.0}, func(t *testing.T, ps []dashboard.Point) {
			if e := meanAbsError(ps[15:]); ps[len(ps)-1].Setpoint != 50 || e > 1.5 {
				t.Errorf("after a setpoint edit to 50: setpoint %v, mean error %.2f; want 50 held within 1.5", ps[len(ps)-1].Setpoint, e)
			}
		}},
		{"manual 50", dashboard.Params{"mode": "manual", "manual_rate": 50.0}, func(t *testing.T, ps []dashboard.Point) {
			for _, p := range ps[1:] {
				if p.Mode != "manual" || p.Rate != 50 {
					t.Fatalf("manual mode point = mode %q rate %v; want manual 50", p.Mode, p.Rate)
				}
			}
		}},
		{"shadow", dashboard.Params{"mode": "shadow"}, func(t *testing.T, ps []dashboard.Point) {
			// RATE is no longer written: it expires (rate_ttl 3m) and consumers fall back to the safe rate
			last := ps[len(ps)-1]
			if last.Mode != "shadow" || math.Abs(last.Consumed-20) > 0.1 {
				t.Errorf("shadow mode: mode %q, consumed %v; want shadow with consumers at the safe 20", last.Mode, last.Consumed)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDemo(t)
			steps(t, d, 30)
			edit(t, d, tt.change)
			tt.check(t, steps(t, d, 30))
		})
	}
}

func TestDemoDeterministic(t *testing.T) {
	a, b := steps(t, newDemo(t), 40), steps(t, newDemo(t), 40)
	for i := range a {
		if a[i].Measured != b[i].Measured && !(math.IsNaN(a[i].Measured) && math.IsNaN(b[i].Measured)) || a[i].Rate != b[i].Rate {
			t.Fatalf("point %d differs between two demos with one seed: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// With Traffic.Inner the demo's consumer runs the inner loop (PARAMS
// inner_loop): its history
// carries the consumers' latency and, once learned, its reference, and
// the disturbance at minute 60 makes the inner loop cut (a withheld rate)
// within its first minutes.
func TestDemoChartsTheInnerLoop(t *testing.T) {
	d, err := stepdemo.NewWithTraffic(t0, 1, stepdemo.Traffic{Inner: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ps := steps(t, d, 70)
	st, err := d.Params().Params(context.Background(), stepdemo.LoopID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Params["inner_loop"] != true {
		t.Errorf("PARAMS inner_loop = %v; want true", st.Params["inner_loop"])
	}
	learned, cut := false, false
	for _, p := range ps {
		if p.InnerLatency <= 0 && p.T.Sub(ps[0].T) > 10*time.Minute {
			t.Fatalf("point at %v without the consumers' latency", p.T)
		}
		learned = learned || p.InnerReference > 0
		cut = cut || (p.T.Sub(ps[0].T) >= 60*time.Minute && p.Withheld > 0)
	}
	if !learned || !cut {
		t.Errorf("history: reference learned %v, a cut after the disturbance %v; want both", learned, cut)
	}
}
