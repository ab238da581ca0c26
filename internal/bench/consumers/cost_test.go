package consumers_test

import (
	"context"
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
	// Never above the allowed rate. Below it is a failure only past what a
	// busy machine explains: the paced row runs its few instances at about
	// 80 % of what they take when the machine is idle (5 x 24 msg/s for 96
	// allowed), so batches a third slower (another job on both cores) show
	// as a shortfall of about 13 % that is not the pacer's.
	for _, r := range rows {
		if r.ErrorPct > 10 || r.ErrorPct < -30 {
			t.Errorf("%s: achieved %.1f of %.1f msg/s (%.1f %%); want at most 10 %% above it and no more than 30 %% below over a short window",
				r.Mode, r.Achieved, r.Allowed, r.ErrorPct)
		}
	}
}
