package main

import (
	"flag"
	"fmt"
	"math"
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
	return simPlant{Capacity: 20, Tested: simTested, Measured: measured, CPUGain: 0.45, CPUBase: 2, Noise: 0.3, Fetch: *simFetch, Seed: seed}
}

// simTested is what the model's capacity test measured (-sim's tested).
var simTested = 28.0

// TestModelReproducesTheRealRuns checks the model against the real pair
// (docs/replica.md, runs 13 to 24), ten seeds each: tuned from the capacity
// test (1.4 times the replica's pace in the loop) with the defaults of then
// (no drain feedforward, kd half the tested capacity), the lag
// sits near its setpoint on average but a fifth to a third of the readings
// after settling are above its band (runs 22 and 23: mean 8.7 s, shares
// 0.25 and 0.28); with kd the whole tested capacity it sits low (runs 14
// and 18: mean 3.5 and 2.5 s).
func TestModelReproducesTheRealRuns(t *testing.T) {
	run := func(c config) (mean, above float64) {
		for seed := uint64(1); seed <= 10; seed++ {
			res, _ := modelPlant(seed, 0).simulate(c)
			if res.Missing != 0 || res.LimitingSwitches == 0 || res.LagLimitingAtS < 0 {
				t.Fatalf("seed %d: missing %d, %d switches, lag limiting from %g s", seed, res.Missing, res.LimitingSwitches, res.LagLimitingAtS)
			}
			mean += res.MeanLagAfterSettle / 10
			above += res.ShareAboveBand / 10
		}
		return mean, above
	}
	c := defaults()
	c.lagDrain, c.lagKd, c.duration = false, 0.5, 210*time.Second // the defaults then
	if mean, above := run(c); math.Abs(mean-8.7) > 1.5 || above < 0.1 || above > 0.45 {
		t.Errorf("the defaults: mean lag %.2f s, share above the band %.2f; the real runs: 8.7 s, 0.25 to 0.28", mean, above)
	}
	c.lagKd = 1
	if mean, above := run(c); mean > 5 || above > 0.1 {
		t.Errorf("kd = capacity: mean lag %.2f s, share above the band %.2f; the real runs: 2.5 to 3.5 s, 0", mean, above)
	}
}

// TestDefaultsHoldTheLagOnTheModel runs the defaults (the lag's controller
// on the replica's measured pace, drain_feedforward) on the model, tuned
// from the capacity test, sixteen seeds: the lag must be held as the real
// run's check asks in at least twelve (fifteen when this was written; the
// defaults before, without the measured pace: two in ten).
func TestDefaultsHoldTheLagOnTheModel(t *testing.T) {
	c := defaults()
	passed := 0
	for seed := uint64(1); seed <= 16; seed++ {
		res, fails := modelPlant(seed, 0).simulate(c)
		if len(fails) == 0 {
			passed++
		} else {
			t.Logf("seed %d: mean lag %.2f s, share above the band %.2f: %v", seed, res.MeanLagAfterSettle, res.ShareAboveBand, fails)
		}
	}
	if passed < 12 {
		t.Errorf("the defaults held the lag in %d of 16 seeds, want at least 12", passed)
	}
}

var (
	simSpecs = flag.String("sim", "", "TestSimulate*: settings to try, ';' between runs, e.g. 'kd=0.5,tauc=2;kd=0.75' (kd, tauc, theta, df (s), aw, slew, ratio, dur (s))")
	simSeeds = flag.Int("sim-seeds", 6, "TestSimulateExplore: seeds per setting")
	simFetch = flag.Duration("sim-fetch", 2*time.Second, "the model's longest wait before the replica sees the primary's writes")
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
			if s.Drain != nil {
				line += fmt.Sprintf(" pace %.1f last %.1f", s.Drain.Pace, s.Drain.Last)
			}
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
	simTested = 28
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
		case "tested":
			simTested = f
		case "drain":
			c.lagDrain = f != 0
		case "cpuat":
			c.cpuAt = f
		case "window":
			c.lagWindow = time.Duration(f * float64(time.Second))
		case "dur":
			c.duration = time.Duration(f * float64(time.Second))
		}
	}
	return c, ratio
}
