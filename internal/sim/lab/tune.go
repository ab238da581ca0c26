package lab

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
	sluiceloop "github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// derivativeFilterN is N in the derivative filter time constant Td/N.
const derivativeFilterN = 10

// NewPolicy builds controller name for scenario s from what the step test
// identified (never from the true plant). pi and pid are tuned by SIMC on
// the loop model, whose dead time is the identified dead time plus the
// metric pipeline's and the tick's (known configuration). pi-aw-spf-ff keeps
// SIMC's Kp and adds conditional anti-windup, the setpoint filter, the
// reference feedforward and the delay-aware integrator, whose Ki is set for
// the loop without the delay it predicts (IntegralTime). smith is SIMC on the
// delay-free model inside a predictor with the loop dead time. fixed is the
// model's rate for the initial setpoint; aimd adds a twentieth of it per
// datapoint at or below the setpoint and multiplies by 0.8 above. It returns
// the policy and its parameters.
func NewPolicy(name string, s sim.Scenario, p Plant, g Gains) (sim.Policy, map[string]float64, error) {
	m := p.Model
	loop := tuning.LoopModel(m, s.PipelineDelay())
	nominal := clampRate(m.Input(s.Setpoint), s.MaxRate)
	switch name {
	case Override:
		return newOverride(s, p, g)
	case Cascade:
		return newCascade(s, p, g)
	case Fixed:
		return fixedPolicy{rate: nominal}, map[string]float64{"rate": nominal}, nil
	case AIMD:
		inc := nominal / 20
		return &aimdPolicy{increase: inc, decrease: 0.8, min: inc, max: s.MaxRate},
			map[string]float64{"increase": inc, "decrease": 0.8}, nil
	case Smith:
		// The PI works on the delay-free model; its closed-loop time
		// constant is the loop dead time, as SIMC chooses for the PI.
		free := m
		free.DeadTime = 0
		tg, err := tuning.Tune(free, tuning.SIMC, tuning.Options{Form: tuning.PI, TauC: loop.DeadTime})
		if err != nil {
			return nil, nil, fmt.Errorf("tune %s: %w", name, err)
		}
		kp, ki, _ := override(tg, g)
		cfg := SmithConfig{Kp: kp, Ki: ki, Min: 0, Max: s.MaxRate, Model: loop, MeasurementMin: 0, MeasurementMax: 100}
		if err := cfg.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		return &smithPolicy{c: SmithPredictor{Config: cfg}}, map[string]float64{"kp": kp, "ki": ki, "dead_time_s": loop.DeadTime.Seconds()}, nil
	case PI, PID, PIAWSPFF:
		form := tuning.PI
		if name == PID {
			form = tuning.PID
		}
		tg, err := tuning.Tune(loop, tuning.SIMC, tuning.Options{Form: form})
		if err != nil {
			return nil, nil, fmt.Errorf("tune %s: %w", name, err)
		}
		kp, ki, kd := override(tg, g)
		cfg := control.Config{Kp: kp, Ki: ki, Kd: kd, Min: 0, Max: s.MaxRate, MeasurementMin: 0, MeasurementMax: 100}
		if kd > 0 && kp > 0 {
			cfg.DerivativeFilter = time.Duration(kd / kp / derivativeFilterN * float64(time.Second))
		}
		tun := map[string]float64{"kp": kp, "ki": ki, "kd": kd}
		if name == PIAWSPFF {
			cfg.AntiWindup = control.AntiWindupConditional
			cfg.SetpointFilter = tuning.TrustedSetpointFilter(loop, p.modelError())
			ff := m
			cfg.Feedforward = &ff
			// Delay-aware integrator: tuned for the loop without the
			// measurement delay it predicts, with the plant's gain
			// re-identified online, which lets it be faster.
			cfg.DelayAware = true
			cfg.AdaptGain = true
			tc := AdaptiveIntegralTime(s, p)
			cfg.Ki = 1 / (m.Gain * tc.Seconds())
			if g.Ki != nil {
				cfg.Ki = *g.Ki
			}
			cfg.NoiseBand = NoiseBandFactor * p.NoiseSD
			// The product's defaults: hold near what was taken while the
			// queue is empty, cut at a pinned CPU.
			cfg.DemandConfig = control.DemandConfig{Headroom: sluiceloop.DefaultDemandHeadroom, Ceiling: sluiceloop.DefaultCeiling}
			tun["ki"] = cfg.Ki
			tun["noise_band"] = cfg.NoiseBand
			tun["setpoint_filter_s"] = cfg.SetpointFilter.Seconds()
		}
		if err := cfg.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		return &pidPolicy{c: control.Controller{Config: cfg}}, tun, nil
	}
	return nil, nil, fmt.Errorf("unknown controller %q", name)
}

// SetpointFilter is the setpoint filter time constant for the loop model
// (tuning.SetpointFilter, the product's rule).
func SetpointFilter(loop control.FOPDT) time.Duration { return tuning.SetpointFilter(loop) }

// Plant is what the step test taught about the plant: its model, the
// measurement noise and, when known, the fit's residual relative to the
// step's response (the setpoint filter trusts the model as much as it
// says: tuning.TrustedSetpointFilter).
type Plant struct {
	Model           control.FOPDT
	NoiseSD         float64
	ModelError      float64
	ModelErrorKnown bool
	// Replica is the replica's step test, when the scenario has one.
	Replica ReplicaModel
}

// modelError is ModelError, or NaN when unknown.
func (p Plant) modelError() float64 {
	if !p.ModelErrorKnown {
		return math.NaN()
	}
	return p.ModelError
}

// IdentifiedPlant is what Identify's step test taught: the model, the
// baseline noise and the fit's RMSE over the step's response.
func IdentifiedPlant(m control.FOPDT, mv Model) Plant {
	p := Plant{Model: m, NoiseSD: mv.NoiseSD}
	if resp := m.Gain * math.Abs(mv.StepTo-mv.StepFrom); resp > 0 {
		p.ModelError, p.ModelErrorKnown = mv.RMSE/resp, true
	}
	return p
}

// NoiseBandFactor times the noise measured on the step test's baseline is
// the error below which the integrator raises the rate slowly
// (control.Config.NoiseBand).
const NoiseBandFactor = tuning.NoiseBandFactor

// IntegralTime is the closed-loop time constant Tc of the delay-aware
// integrator (Ki = 1/(gain Tc)): tuning.IntegralTime, three quarters of the
// loop dead time.
func IntegralTime(s sim.Scenario, p Plant) time.Duration {
	return tuning.IntegralTime(tuning.LoopModel(p.Model, s.PipelineDelay()))
}

// AdaptiveIntegralTime is Tc of the delay-aware integrator when it adapts
// the model's gain online (control.Config.AdaptGain, the lab's
// pi-aw-spf-ff): half the loop dead time. Without adaptation a faster
// integrator rings on a plant whose gain doubled (IntegralTime keeps three
// quarters); with it the gain error is corrected after a few datapoints.
func AdaptiveIntegralTime(s sim.Scenario, p Plant) time.Duration {
	return tuning.LoopModel(p.Model, s.PipelineDelay()).DeadTime / 2
}

func override(t tuning.Gains, g Gains) (kp, ki, kd float64) {
	kp, ki, kd = t.Kp, t.Ki, t.Kd
	if g.Kp != nil {
		kp = *g.Kp
	}
	if g.Ki != nil {
		ki = *g.Ki
	}
	if g.Kd != nil {
		kd = *g.Kd
	}
	return kp, ki, kd
}

func clampRate(r, max float64) float64 {
	if r < 0 {
		return 0
	}
	if r > max {
		return max
	}
	return r
}
