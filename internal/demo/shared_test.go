package demo

import (
	"context"
	"testing"
)

// TestSharedScenario runs the default shared scenario, the single loop that
// carries the same total traffic, and the naive layout, and checks the
// acceptance: fair shares within 5 % of the rate, no violation after the
// burst, nothing lost, the destination's IAE within 10 % of the single
// loop's.
func TestSharedScenario(t *testing.T) {
	s, members, changes := SharedScenario()
	ctrl, _, err := Tune(s)
	if err != nil {
		t.Fatal(err)
	}
	params := DefaultParams(s, ctrl)
	run := func(layout SharedLayout) SharedResult {
		res, err := RunShared(context.Background(), SharedConfig{Scenario: s, Params: params, Members: members, WeightChanges: changes, Layout: layout})
		if err != nil {
			t.Fatalf("RunShared(%s): %v", layout, err)
		}
		return res
	}
	shared, single, naive := run(LayoutShared), run(LayoutSingle), run(LayoutNaive)
	t.Logf("shared: fair err %.4f at %.0f s (%s), above sp+5 %.0f s, max cpu %.1f, lost %d, IAE %.0f, osc %.2f", shared.FairShareErrorMax, shared.FairShareErrorAt, shared.FairShareErrorMember, shared.SecondsAboveSP5, shared.MaxCPU, shared.Lost, shared.Metrics.IAE, shared.Oscillation)
	t.Logf("single: IAE %.0f, osc %.2f; naive: IAE %.0f, osc %.2f, above %.0f s", single.Metrics.IAE, single.Oscillation, naive.Metrics.IAE, naive.Oscillation, naive.SecondsAboveSP5)
	for _, m := range shared.Members {
		t.Logf("  %+v", m)
	}
	if shared.FairShareErrorMax > 0.05 {
		t.Errorf("fair_share_error_max = %.4f; want <= 0.05", shared.FairShareErrorMax)
	}
	if shared.SecondsAboveSP5 != 0 || shared.Lost != 0 {
		t.Errorf("seconds above sp+5 after the burst %v, lost %d; want 0, 0", shared.SecondsAboveSP5, shared.Lost)
	}
	if r := shared.Metrics.IAE / single.Metrics.IAE; r > 1.1 {
		t.Errorf("IAE shared %.0f / single %.0f = %.3f; want <= 1.1", shared.Metrics.IAE, single.Metrics.IAE, r)
	}
	if naive.Metrics.IAE <= shared.Metrics.IAE {
		t.Errorf("naive IAE %.0f <= shared %.0f; want the naive layout worse", naive.Metrics.IAE, shared.Metrics.IAE)
	}
}
