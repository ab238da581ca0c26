package ident

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// closedLoopData simulates a loop's history on model m: the input steps
// through levels every 20 ticks, an unmeasured load of dist points sits
// from tick 50 to tick 80, and each datapoint is the CPU's mean over its
// period, placed pipeline before its tick, plus noise.
func closedLoopData(m control.FOPDT, dist, noise float64, period, pipeline time.Duration) History {
	const tick, n = 60.0, 120
	levels := []float64{400, 800, 600, 1000, 700, 900}
	input := func(t float64) float64 {
		if t < 0 {
			return 0
		}
		return levels[int(t/tick/20)%len(levels)]
	}
	rng := rand.New(rand.NewPCG(3, 4))
	// The CPU on a 1 s grid from well before the first tick.
	const start = -1200.0
	var ts, us []float64
	for t := start; t < n*tick; t++ {
		ts, us = append(ts, t), append(us, input(math.Floor(t/tick)*tick))
	}
	cpu := Simulate(m, ts, us)
	var h History
	for k := range n {
		tk := float64(k) * tick
		mid := tk - pipeline.Seconds()
		sum, cnt := 0.0, 0.0
		for t := mid - period.Seconds()/2; t < mid+period.Seconds()/2; t++ {
			c := cpu[int(t-start)]
			if t >= 50*tick && t < 80*tick {
				c += dist
			}
			sum, cnt = sum+c, cnt+1
		}
		h.T = append(h.T, tk)
		h.U = append(h.U, input(tk-1))
		h.Y = append(h.Y, sum/cnt+noise*rng.NormFloat64())
	}
	return h
}

func TestFitClosedLoop(t *testing.T) {
	m := control.FOPDT{Gain: 0.05, Base: 10, Tau: 90 * time.Second, DeadTime: 40 * time.Second}
	opt := ClosedLoopOptions{MetricPeriod: time.Minute, PipelineDelay: 150 * time.Second}
	for _, c := range []struct {
		name        string
		dist, noise float64
		wantDist    int
	}{
		{"noiseless", 0, 0, 0},
		{"noise", 0, 1, 0},
		{"unmeasured load", 15, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := FitClosedLoop(closedLoopData(m, c.dist, c.noise, opt.MetricPeriod, opt.PipelineDelay), opt)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Model
			if math.Abs(got.Gain-m.Gain)/m.Gain > 0.05 || math.Abs(got.Base-m.Base) > 1 {
				t.Errorf("model %+v; want gain %v within 5 %%, base %v within 1", got, m.Gain, m.Base)
			}
			if total := got.Tau + got.DeadTime; math.Abs((total - 130*time.Second).Seconds()) > 20 {
				t.Errorf("lag + dead time %v; want 130s within 20s", total)
			}
			if lo, hi := res.LagDeadTime[0], res.LagDeadTime[1]; lo > got.Tau+got.DeadTime || hi < got.Tau+got.DeadTime {
				t.Errorf("interval [%v, %v] does not hold the fit's %v", lo, hi, got.Tau+got.DeadTime)
			}
			if len(res.Disturbances) != c.wantDist {
				t.Fatalf("disturbances %+v; want %d", res.Disturbances, c.wantDist)
			}
			if c.wantDist == 1 {
				d := res.Disturbances[0]
				if math.Abs(d.Size-c.dist) > 1 || math.Abs(d.FromS-3000) > 30 || math.Abs(d.ToS-4800) > 30 {
					t.Errorf("disturbance %+v; want %v points from 3000 s to 4800 s", d, c.dist)
				}
			}
			if !res.Excitation.OK || res.GainSE <= 0 && c.noise > 0 {
				t.Errorf("excitation %+v, gain SE %v; want ok and a positive SE with noise", res.Excitation, res.GainSE)
			}
		})
	}
}

func TestFitClosedLoopRefuses(t *testing.T) {
	opt := ClosedLoopOptions{MetricPeriod: time.Minute, PipelineDelay: 150 * time.Second}
	flat := History{}
	for k := range 60 {
		flat.T, flat.U, flat.Y = append(flat.T, float64(60*k)), append(flat.U, 1000), append(flat.Y, 60+0.5*math.Sin(float64(k)))
	}
	if _, err := FitClosedLoop(flat, opt); !errors.Is(err, ErrNoExcitation) {
		t.Errorf("constant input: %v; want ErrNoExcitation", err)
	}
	// The input moves, but the output is noise: the gain is unknown.
	noisy := History{}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range 60 {
		noisy.T = append(noisy.T, float64(60*k))
		noisy.U = append(noisy.U, 1000+100*float64(k%2))
		noisy.Y = append(noisy.Y, 60+5*rng.NormFloat64())
	}
	if _, err := FitClosedLoop(noisy, opt); !errors.Is(err, ErrNoExcitation) {
		t.Errorf("output without response: %v; want ErrNoExcitation", err)
	}
	for name, h := range map[string]History{
		"lengths":   {T: []float64{0, 60}, U: []float64{1}, Y: []float64{1, 2}},
		"too few":   {T: flat.T[:10], U: flat.U[:10], Y: flat.Y[:10]},
		"time":      {T: []float64{0, 60, 60}, U: []float64{1, 1, 1}, Y: []float64{1, 1, 1}},
		"empty":     {},
		"all stale": {T: flat.T, U: flat.U, Y: make([]float64, len(flat.T))},
	} {
		if name == "all stale" {
			for i := range h.Y {
				h.Y[i] = math.NaN()
			}
		}
		if _, err := FitClosedLoop(h, opt); err == nil || errors.Is(err, ErrNoExcitation) {
			t.Errorf("%s: %v; want an error about the history", name, err)
		}
	}
	if _, err := FitClosedLoop(flat, ClosedLoopOptions{MetricPeriod: time.Minute}); err == nil {
		t.Error("pipeline delay shorter than half the period: no error")
	}
}

func TestJumpPair(t *testing.T) {
	for _, c := range []struct {
		name   string
		r      []float64
		k1, k2 int
		ok     bool
	}{
		{"pulse", []float64{0, 0, 0, 5, 5, 5, 0, 0}, 3, 5, true},
		{"end found first", []float64{0, 0, 4, 4, 4, -2, -2, -2}, 2, 4, true},
		{"step to the end", []float64{0, 0, 0, 0, 3, 3, 3, 3}, 4, 7, true},
		{"noise only", []float64{0.1, -0.2, 0.1, 0, -0.1, 0.2}, 0, 0, false},
	} {
		k1, k2, ok := jumpPair(c.r)
		if k1 != c.k1 || k2 != c.k2 || ok != c.ok {
			t.Errorf("%s: jumpPair(%v) = %d, %d, %v; want %d, %d, %v", c.name, c.r, k1, k2, ok, c.k1, c.k2, c.ok)
		}
	}
}
