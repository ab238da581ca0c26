package lab

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/sim"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// derivativeFilterN is N in the derivative filter time constant Td/N.
const derivativeFilterN = 10

// NewPolicy builds controller name for scenario s from the identified plant
// model m (never from the true plant): the feedback controllers are tuned by
// SIMC on the loop model, whose dead time is the identified dead time plus
// the metric pipeline's and the tick's (known configuration). It returns the
// policy and its parameters.
func NewPolicy(name string, s sim.Scenario, p Plant, g Gains) (sim.Policy, map[string]float64, error) {
	m := p.Model
	loop := tuning.LoopModel(m, s.PipelineDelay())
	nominal := clampRate(m.Input(s.Setpoint), s.MaxRate)
	switch name {
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
		cfg := control.SmithConfig{Kp: kp, Ki: ki, Min: 0, Max: s.MaxRate, Model: loop, MeasurementMin: 0, MeasurementMax: 100}
		if err := cfg.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		return &smithPolicy{c: control.SmithPredictor{Config: cfg}}, map[string]float64{"kp": kp, "ki": ki, "dead_time_s": loop.DeadTime.Seconds()}, nil
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
			cfg.SetpointFilter = SetpointFilter(loop)
			ff := m
			cfg.Feedforward = &ff
			// Delay-aware integrator: tuned for the loop without the
			// measurement delay it predicts.
			cfg.DelayAware = true
			tc := IntegralTime(s, p)
			cfg.Ki = 1 / (m.Gain * tc.Seconds())
			if g.Ki != nil {
				cfg.Ki = *g.Ki
			}
			cfg.NoiseBand = NoiseBandFactor * p.NoiseSD
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

// SetpointFilter is the setpoint filter time constant for the loop model:
// together with the plant's own lag, half the loop dead time (and at least a
// quarter of it), so that a feedforward built on a slightly wrong gain
// approaches the setpoint from below, slowly enough for the feedback to
// catch part of the error before it shows as overshoot.
func SetpointFilter(loop control.FOPDT) time.Duration {
	return max(loop.DeadTime/2-loop.Tau, loop.DeadTime/4)
}

// Plant is what the step test taught about the plant: its model and the
// measurement noise.
type Plant struct {
	Model   control.FOPDT
	NoiseSD float64
}

// NoiseBandFactor times the measured noise is the error below which the
// delay-aware integrator slows down (control.Config.NoiseBand).
const NoiseBandFactor = 3.0

// NoiseTarget is the standard deviation, in points of CPU, that measurement
// noise may cause in the true CPU through the delay-aware integrator.
const NoiseTarget = 0.35

// IntegralTime is the closed-loop time constant Tc of the delay-aware
// integrator (Ki = 1/(gain Tc)): the loop dead time, or longer when the
// measurement is noisy. With the delay predicted, each new datapoint moves
// the output by g = period/Tc of its error, so the noise (standard deviation
// sigma) reaches the true CPU as sigma sqrt(g/(2-g)); Tc is chosen so that
// this stays below NoiseTarget.
func IntegralTime(s sim.Scenario, p Plant) time.Duration {
	tc := tuning.LoopModel(p.Model, s.PipelineDelay()).DeadTime
	if sd := p.NoiseSD; sd > 0 && NoiseBandFactor == 0 {
		a2 := NoiseTarget * NoiseTarget
		g := 2 * a2 / (sd*sd + a2)
		if t := time.Duration(float64(s.MetricPeriod) / g); t > tc {
			tc = t
		}
	}
	return tc
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
