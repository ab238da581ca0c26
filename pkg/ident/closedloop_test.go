package ident

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
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

// driftHistory is a short record at a 5-s tick whose CPU follows the
// running sum of the input (an integrator: the other tenants' drifting load
// riding on it) and noise: no FOPDT within the record fits it.
func driftHistory() History {
	var h History
	rng := rand.New(rand.NewPCG(5, 6))
	y := 5.0
	for k := range 40 {
		u := 4 + 3*float64((k/5)%2)
		y += 0.08 * u
		h.T, h.U, h.Y = append(h.T, float64(5*k)), append(h.U, u), append(h.Y, y+0.3*rng.NormFloat64())
	}
	return h
}

func TestFitClosedLoopBounded(t *testing.T) {
	opt := ClosedLoopOptions{MetricPeriod: 5 * time.Second, PipelineDelay: 5 * time.Second}
	res, err := FitClosedLoop(driftHistory(), opt)
	if !errors.Is(err, ErrNoExcitation) || res.Excitation.OK {
		t.Fatalf("integrating drift: model %+v, err %v; want a refusal (ErrNoExcitation)", res.Model, err)
	}
	span := 195 * time.Second
	if res.Model.Tau > span || res.Model.DeadTime > span {
		t.Errorf("lag %v, dead time %v: beyond the record's %v; the search must stay within it", res.Model.Tau, res.Model.DeadTime, span)
	}
}

// A fit whose model is implausible is refused with the reason, even with a
// small standard error.
func TestFitClosedLoopRefusesImplausible(t *testing.T) {
	opt := ClosedLoopOptions{MetricPeriod: 5 * time.Second, PipelineDelay: 5 * time.Second}
	p, err := newClosedLoop(driftHistory(), opt)
	if err != nil {
		t.Fatal(err)
	}
	res := ClosedLoopResult{Excitation: p.inputExcitation()}
	fit := clFit{tau: 150, coef: []float64{4, 1.3, 0}, cov: make([]float64, 9), resid: make([]float64, len(p.rows))}
	res, err = p.result(fit, res)
	if !errors.Is(err, ErrNoExcitation) || res.Excitation.OK || !strings.Contains(res.Excitation.Reason, "implausible") {
		t.Errorf("lag 150 s on a 195-s record: ok %v, reason %q, err %v; want a refusal that says the model is implausible",
			res.Excitation.OK, res.Excitation.Reason, err)
	}
	fit.tau = 5
	if res, err = p.result(fit, ClosedLoopResult{Excitation: p.inputExcitation()}); err != nil || !res.Excitation.OK {
		t.Errorf("lag 5 s: ok %v, err %v; want the model", res.Excitation.OK, err)
	}
}

func TestPlausible(t *testing.T) {
	const span = 600.0
	for _, c := range []struct {
		name string
		m    control.FOPDT
		ok   bool
	}{
		{"fine", control.FOPDT{Gain: 1.3, Base: 4, Tau: 5 * time.Second}, true},
		{"gain beyond the CPU's range", control.FOPDT{Gain: 20, Base: 4}, false},
		{"negative base", control.FOPDT{Gain: 1, Base: -30}, false},
		{"base above 100", control.FOPDT{Gain: 1, Base: 120}, false},
		{"lag beyond half the record", control.FOPDT{Gain: 1, Base: 4, Tau: 250 * time.Second, DeadTime: 60 * time.Second}, false},
	} {
		reason := implausible(c.m, 10, span)
		if (reason == "") != c.ok {
			t.Errorf("%s: reason %q; want ok %v", c.name, reason, c.ok)
		}
	}
}
