package lab

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// recorder wraps a policy and keeps what a loop's history keeps, one sample
// per tick: the newest datapoint and the rate processed since the last tick.
type recorder struct {
	p sim.Policy
	h ident.History
}

func (r *recorder) Rate(o sim.Observation) float64 {
	y, u := math.NaN(), math.NaN()
	if o.OK {
		y = o.Datapoint.Value
	}
	if o.Now > 0 {
		u = o.Processed
	}
	r.h.T, r.h.U, r.h.Y = append(r.h.T, o.Now.Seconds()), append(r.h.U, u), append(r.h.Y, y)
	return r.p.Rate(o)
}

// closedLoopHistory runs the product controller, tuned from the true
// plant, on s and returns its history.
func closedLoopHistory(t *testing.T, s sim.Scenario) ident.History {
	t.Helper()
	pol, _, err := NewPolicy(PIAWSPFF, s, Plant{Model: s.Plant, NoiseSD: s.Noise}, Gains{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{p: pol}
	if _, err := sim.Run(s, rec); err != nil {
		t.Fatal(err)
	}
	return rec.h
}

// runIAE runs the product controller tuned from model m on s.
func runIAE(t *testing.T, s sim.Scenario, m control.FOPDT, noiseSD float64) float64 {
	t.Helper()
	pol, _, err := NewPolicy(PIAWSPFF, s, Plant{Model: m, NoiseSD: noiseSD}, Gains{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.Run(s, pol)
	if err != nil {
		t.Fatal(err)
	}
	return r.Metrics.IAE
}

// The acceptance of `sluice tune --from-history` on the simulated plant:
// from the closed-loop history of the reference scenario (no open-loop step
// anywhere) and of three other plants, with noise 1 point, the gain within
// 15 %, the base within 2 points, lag + dead time within 25 % when it is
// longer than two ticks, and the product controller tuned from the model
// within 20 % of the IAE of the one tuned from the true plant.
func TestClosedLoopIdentificationAcceptance(t *testing.T) {
	plants := map[string]control.FOPDT{
		"reference": sim.Reference().Plant,
		"slow":      {Gain: 0.08, Base: 5, Tau: 120 * time.Second, DeadTime: 60 * time.Second},
		"lagging":   {Gain: 0.03, Base: 15, Tau: 300 * time.Second, DeadTime: 20 * time.Second},
		"light":     {Gain: 0.02, Base: 20, Tau: 60 * time.Second, DeadTime: 30 * time.Second},
	}
	for name, plant := range plants {
		t.Run(name, func(t *testing.T) {
			s := sim.Reference()
			s.Plant, s.Noise = plant, 1
			h := closedLoopHistory(t, s)
			res, err := ident.FitClosedLoop(h, ident.ClosedLoopOptions{MetricPeriod: s.MetricPeriod, PipelineDelay: s.PipelineDelay()})
			if err != nil {
				t.Fatalf("FitClosedLoop: %v", err)
			}
			m := res.Model
			t.Logf("model %+v gain ±%.2g base ±%.2g lag+dead %v disturbances %+v", m, res.GainSE, res.BaseSE, res.LagDeadTime, res.Disturbances)
			if e := math.Abs(m.Gain-plant.Gain) / plant.Gain; e > 0.15 {
				t.Errorf("gain %.4g; want %.4g within 15 %% (off by %.0f %%)", m.Gain, plant.Gain, 100*e)
			}
			if math.Abs(m.Base-plant.Base) > 2 {
				t.Errorf("base %.2f; want %.2f within 2 points", m.Base, plant.Base)
			}
			if total := plant.Tau + plant.DeadTime; total > 2*s.Tick {
				got := m.Tau + m.DeadTime
				if e := math.Abs(float64(got-total)) / float64(total); e > 0.25 {
					t.Errorf("lag + dead time %v; want %v within 25 %%", got, total)
				}
			}
			want := runIAE(t, s, plant, s.Noise)
			got := runIAE(t, s, m, res.RMSE)
			t.Logf("IAE tuned from the history %.0f, from the true plant %.0f (ratio %.3f)", got, want, got/want)
			if got > 1.2*want {
				t.Errorf("IAE with the proposal %.0f; want within 20 %% of %.0f (the true plant's tuning)", got, want)
			}
		})
	}
}

// A history without excitation (constant setpoint, no disturbance, a queue
// always full at a constant rate) is refused with the reason.
func TestClosedLoopIdentificationRefusesNoExcitation(t *testing.T) {
	s := sim.Reference()
	s.Noise, s.SetpointChanges, s.Disturbances = 1, nil, nil
	h := closedLoopHistory(t, s)
	from := 60 // the last two hours: the start's transient is over
	h = ident.History{T: h.T[from:], U: h.U[from:], Y: h.Y[from:]}
	_, err := ident.FitClosedLoop(h, ident.ClosedLoopOptions{MetricPeriod: s.MetricPeriod, PipelineDelay: s.PipelineDelay()})
	if !errors.Is(err, ident.ErrNoExcitation) {
		t.Fatalf("FitClosedLoop on a steady history: %v; want ErrNoExcitation", err)
	}
	t.Log(err)
}
