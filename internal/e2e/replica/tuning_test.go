package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// defaults is the run's configuration with the flags' defaults.
var defaults = sync.OnceValue(func() config {
	var c config
	c.declare()
	return c
})

// modelPlant is the model of a run: a replica that keeps up with 20
// orders/s in the loop, whose capacity test said 28 (the real pair's test
// overstates it 1.3 to 2 times: docs/replica.md) and whose steady capacity
// test measured measured (0: none).
func modelPlant(seed uint64, measured float64) simPlant {
	return simPlant{Capacity: 20, Tested: 28, Measured: measured, CPUGain: 0.45, CPUBase: 2, Noise: 0.3, Fetch: *simFetch, Seed: seed}
}

// TestDefaultsHoldTheLagOnTheModel runs the harness's default tuning on the
// plant's model (plantsim_test.go) for ten seeds: the lag must be held as
// the real run's check asks (mean after settling within the band, at most a
// tenth of the readings above it) in at least eight. The earlier defaults
// (-lag-kd 0.5 -lag-tau-c 2 -lag-theta-extra 0) passed one seed in ten, as
// the real runs 22 and 23 (mean 8.7 s, a quarter of the readings above the
// band) failed.
func TestDefaultsHoldTheLagOnTheModel(t *testing.T) {
	c := defaults()
	passed := 0
	for seed := uint64(1); seed <= 10; seed++ {
		res, fails := modelPlant(seed, 20*[]float64{0.9, 1, 1.1}[seed%3]).simulate(c)
		if len(fails) == 0 {
			passed++
		} else {
			t.Logf("seed %d: mean lag %.2f s, share above the band %.2f: %v", seed, res.MeanLagAfterSettle, res.ShareAboveBand, fails)
		}
		if res.Missing != 0 || res.LimitingSwitches == 0 {
			t.Errorf("seed %d: missing %d, %d switches", seed, res.Missing, res.LimitingSwitches)
		}
	}
	if passed < 8 {
		t.Errorf("the defaults held the lag in %d of 10 seeds, want at least 8", passed)
	}
}

var (
	simSpecs = flag.String("sim", "", "TestSimulate*: settings to try, ';' between runs, e.g. 'kd=0.5,tauc=2;kd=0.75' (kd, tauc, theta, df (s), aw, slew, ratio, dur (s))")
	simSeeds = flag.Int("sim-seeds", 6, "TestSimulateExplore: seeds per setting")
	simFetch = flag.Duration("sim-fetch", 4*time.Second, "the model's longest wait before the replica sees the primary's writes")
)

// TestSimulateExplore tries settings on the model: go test
// ./internal/e2e/replica -run TestSimulateExplore -v -args -sim 'kd=0.75;kd=1'.
func TestSimulateExplore(t *testing.T) {
	if *simSpecs == "" {
		t.Skip("-sim not given")
	}
	for _, spec := range strings.Split(*simSpecs, ";") {
		c, ratio := simSpec(spec)
		var mean, above, peak float64
		ok := 0
		for seed := uint64(1); seed <= uint64(*simSeeds); seed++ {
			res, fails := modelPlant(seed, 20*ratio).simulate(c)
			mean += res.MeanLagAfterSettle / float64(*simSeeds)
			above += res.ShareAboveBand / float64(*simSeeds)
			peak = max(peak, res.MaxLag)
			if len(fails) == 0 {
				ok++
			}
		}
		fmt.Printf("%-45s mean %5.2f above %.2f peak %5.1f ok %d/%d\n", spec, mean, above, peak, ok, *simSeeds)
	}
}

// TestSimulateTrace prints the ticks of one run of the first -sim setting.
func TestSimulateTrace(t *testing.T) {
	if *simSpecs == "" {
		t.Skip("-sim not given")
	}
	c, ratio := simSpec(strings.Split(*simSpecs, ";")[0])
	pl := modelPlant(1, 20*ratio)
	pl.Trace = func(at float64, st loop.State) {
		line := fmt.Sprintf("%5.0f rate %5.1f lim %-4s", at, st.Rate, st.Limiting)
		for _, s := range st.Signals {
			o := s.Terms
			line += fmt.Sprintf(" | %s y %5.1f r %5.1f p %6.2f i %6.2f d %6.2f ff %5.1f int %v sat %v", s.Name, s.Measured, o.Rate, o.P, o.I, o.D, o.FF, o.Integrated, o.Saturated)
		}
		fmt.Println(line)
	}
	res, fails := pl.simulate(c)
	fmt.Println(res.MeanLagAfterSettle, res.ShareAboveBand, fails)
}

// simSpec is a -sim setting: the defaults changed by k=v pairs, and the
// ratio of the capacity the loop is tuned from (the steady capacity test's) to the
// replica's (1 unless given; ratio=0: no steady test, the capacity test's 1.4).
func simSpec(spec string) (config, float64) {
	c, ratio := defaults(), 1.0
	for _, kv := range strings.Split(spec, ",") {
		k, v, _ := strings.Cut(kv, "=")
		f, _ := strconv.ParseFloat(v, 64)
		switch k {
		case "kd":
			c.lagKd = f
		case "tauc":
			c.tauC = f
		case "theta":
			c.lagThetaExtra = f
		case "df":
			c.lagDF = time.Duration(f * float64(time.Second))
		case "aw":
			c.lagAW = v
		case "slew":
			c.slew = f
		case "ratio":
			ratio = f
		case "window":
			c.lagWindow = time.Duration(f * float64(time.Second))
		case "dur":
			c.duration = time.Duration(f * float64(time.Second))
		}
	}
	return c, ratio
}
