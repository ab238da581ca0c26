package consumers_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
)

// TestLambdaCostShort is the lambda_cost scenario made small: 8 instances
// unpaced, then half their drain with the mapping's concurrency set by the
// rule (paced) and left at 8 (fixed). The paced mapping runs fewer
// instances and bills fewer GB-seconds per million messages than the fixed
// one, at the same allowed rate. `make bench-consumers` runs it full size.
func TestLambdaCostShort(t *testing.T) {
	if testing.Short() {
		t.Skip("about 90 s of real time")
	}
	e := env(t)
	rows, err := consumers.LambdaCost(context.Background(), e, consumers.CostOptions{
		Emulators: 8, StoreLatency: 200 * time.Millisecond, Points: []float64{0.5}, Warmup: 17 * time.Second, Window: 12 * time.Second,
	})
	if err != nil {
		t.Fatalf("LambdaCost: %v", err)
	}
	if len(rows) != 2 || rows[0].Mode != "paced" || rows[1].Mode != "fixed" {
		t.Fatalf("rows %+v; want a paced and a fixed row", rows)
	}
	paced, fixed := rows[0], rows[1]
	t.Logf("paced %+v\nfixed %+v", paced, fixed)
	if paced.Concurrency >= fixed.Concurrency || paced.GBsPerMillion >= fixed.GBsPerMillion {
		t.Errorf("paced: %d instances, %.0f GB-s per million; fixed: %d, %.0f; want fewer instances and fewer GB-s paced",
			paced.Concurrency, paced.GBsPerMillion, fixed.Concurrency, fixed.GBsPerMillion)
	}
	for _, r := range rows {
		if math.Abs(r.ErrorPct) > 10 {
			t.Errorf("%s: achieved %.1f of %.1f msg/s (%.1f %%); want within 10 %% over a short window", r.Mode, r.Achieved, r.Allowed, r.ErrorPct)
		}
	}
}
