package tuning

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// NoiseBandFactor times the measurement's noise (standard deviation) is the
// product controller's noise band: errors within it are integrated slowly.
const NoiseBandFactor = 3.0

// Product is the product controller's tuning (the lab's pi-aw-spf-ff, the
// demo's and the sample PARAMS' controller) for a plant model: SIMC's Kp on
// the loop model, the delay-aware integrator with Ki = 1/(gain Tc), Tc three
// quarters of the loop dead time, the reference feedforward on the model,
// the setpoint filter, conditional anti-windup and the noise band.
type Product struct {
	// Kp in (msg/s) per point, Ki in (msg/s) per point-second.
	Kp float64 `json:"kp"`
	Ki float64 `json:"ki"`
	// SetpointFilter is the setpoint filter's time constant.
	SetpointFilter time.Duration `json:"setpoint_filter"`
	// NoiseBand is the error band, points, integrated slowly.
	NoiseBand float64 `json:"noise_band"`
	// Feedforward is the model the feedforward and the delay-aware
	// integrator use (PARAMS ff_gain, ff_base, ff_tau, ff_dead_time).
	Feedforward control.FOPDT `json:"feedforward"`
}

// TuneProduct returns the product controller's tuning for plant model m
// seen through a metric pipeline that adds pipeline to its dead time
// (metric period/2 + publication delay + tick/2), with measurement noise
// of standard deviation noiseSD points. modelErr is the identification's
// residual relative to the response it explained (RMSE over gain x the
// input's step or range); NaN when unknown. The setpoint filter trusts the
// model as much as modelErr says (TrustedSetpointFilter).
func TuneProduct(m control.FOPDT, pipeline time.Duration, noiseSD, modelErr float64) (Product, error) {
	if pipeline < 0 || math.IsNaN(noiseSD) || noiseSD < 0 || modelErr < 0 {
		return Product{}, fmt.Errorf("tune product: pipeline delay %v, noise %v and model error %v must not be negative", pipeline, noiseSD, modelErr)
	}
	loop := LoopModel(m, pipeline)
	g, err := Tune(loop, SIMC, Options{Form: PI})
	if err != nil {
		return Product{}, err
	}
	tc := IntegralTime(loop)
	return Product{
		Kp:             g.Kp,
		Ki:             1 / (m.Gain * tc.Seconds()),
		SetpointFilter: TrustedSetpointFilter(loop, modelErr),
		NoiseBand:      NoiseBandFactor * noiseSD,
		Feedforward:    m,
	}, nil
}

// IntegralTime is the closed-loop time constant Tc of the delay-aware
// integrator for the loop model: three quarters of the loop dead time. With
// the delay predicted, each datapoint moves the output by period/Tc of its
// error: fast enough to reject a disturbance within about two loop dead
// times, slow enough that a model whose timing is off by a metric period
// does not oscillate.
func IntegralTime(loop control.FOPDT) time.Duration { return loop.DeadTime * 3 / 4 }

// SetpointFilter is the setpoint filter's time constant for the loop model:
// together with the plant's own lag, half the loop dead time (and at least a
// quarter of it), so that a feedforward built on a slightly wrong gain
// approaches the setpoint from below.
func SetpointFilter(loop control.FOPDT) time.Duration {
	return max(loop.DeadTime/2-loop.Tau, loop.DeadTime/4)
}

// The model's relative error below which the setpoint filter is off, and
// above which it is SetpointFilter's whole time constant.
const (
	TrustedModelError   = 0.02
	UntrustedModelError = 0.10
)

// TrustedSetpointFilter is the setpoint filter for a model whose
// identification left a relative residual modelErr: none when modelErr is
// at most TrustedModelError (the feedforward alone then lands within about
// 1 point of a 50-point step), SetpointFilter(loop) when it is at least
// UntrustedModelError or unknown (NaN), in proportion between. The filter
// exists so that a feedforward on a wrong gain approaches from below; a
// model that explains its data leaves nothing for it to hide, and the
// filter's delay is then pure cost (on the reference, a start at 3,433
// point-s against the floor's 1,200).
func TrustedSetpointFilter(loop control.FOPDT, modelErr float64) time.Duration {
	full := SetpointFilter(loop)
	if math.IsNaN(modelErr) || modelErr >= UntrustedModelError {
		return full
	}
	f := (modelErr - TrustedModelError) / (UntrustedModelError - TrustedModelError)
	if f <= 0 {
		return 0
	}
	return time.Duration(f * float64(full))
}
