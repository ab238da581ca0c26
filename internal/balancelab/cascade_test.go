package balancelab

import (
	"testing"
)

func TestCascade(t *testing.T) {
	got := map[string]CascadeResult{}
	for _, v := range CascadeVariants() {
		r, err := RunCascade(v.Scenario)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		t.Logf("%-32s throughput %4.0f/s, hottest peak %5.1f %%, %4.0f s above 75 %%, %4.0f s at 100 %%, max/avg %.3f",
			v.Name, r.Throughput, r.PeakMax, r.SecondsOver, r.SecondsSaturated, r.MaxAvg)
		got[v.Name] = r
	}
	fastMax, fastMean := got["rate on max, balancer 15 s"], got["rate on mean, balancer 15 s"]
	// With a fast balancer the two choices cost about the same.
	if d := fastMax.Throughput / fastMean.Throughput; d < 0.98 {
		t.Errorf("throughput regulating the hottest node / the mean = %.3f; want >= 0.98 with a fast balancer", d)
	}
	// Without one, regulating the mean overloads the smallest node for
	// most of the run; regulating the hottest node does not.
	rrMax, rrMean := got["rate on max, round-robin"], got["rate on mean, round-robin"]
	if rrMean.SecondsOver < 1800 || rrMax.SecondsOver > 600 {
		t.Errorf("seconds above setpoint+5 with round-robin: mean %v, max %v; want mean >= 1800, max <= 600",
			rrMean.SecondsOver, rrMax.SecondsOver)
	}
	// A balancer slower than the rate loop lets the hottest node run hot
	// for longer, whichever utilization the rate loop holds.
	for _, reg := range []string{"max", "mean"} {
		fast, slow := got["rate on "+reg+", balancer 15 s"], got["rate on "+reg+", balancer 240 s"]
		if slow.SecondsOver <= fast.SecondsOver {
			t.Errorf("rate on %s: seconds above setpoint+5 with a slow balancer %v; want more than with a fast one (%v)",
				reg, slow.SecondsOver, fast.SecondsOver)
		}
	}
}

func TestRunCascadeRejectsBadScenarios(t *testing.T) {
	for i, edit := range []func(*CascadeScenario){
		func(s *CascadeScenario) { s.RateTick = 7e9 },
		func(s *CascadeScenario) { s.BalanceTick = -1 },
		func(s *CascadeScenario) { s.Regulated = "p99" },
		func(s *CascadeScenario) { s.Duration = 0 },
		func(s *CascadeScenario) { s.Rate.Max = -1 },
		func(s *CascadeScenario) { s.Balance.IntegralGain = 0 },
	} {
		s := DefaultCascade(RegulateMax)
		edit(&s)
		if _, err := RunCascade(s); err == nil {
			t.Errorf("bad cascade %d: RunCascade = nil error; want an error", i)
		}
	}
}
