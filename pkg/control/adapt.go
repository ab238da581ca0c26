package control

import (
	"math"
	"time"
)

// Gain adaptation (Config.AdaptGain): the delay-aware integrator re-identifies
// the plant's gain online from its own datapoints. A load from outside shifts
// the measurement by a constant whatever the rate, a gain error scales the
// measurement's response to the rate; so the estimator works on the changes
// between consecutive datapoints, where a constant load cancels: with dz the
// change of what the nominal model predicts from the rates applied (above its
// base) and dy the change of the measurement, the gain scale is the
// least-squares slope of dy on dz (through the origin), with forgetting.
const (
	// AdaptForgetting is the weight a datapoint pair keeps per later
	// datapoint.
	AdaptForgetting = 0.8
	// AdaptMinExcitation is the least root of the (forgotten) sum of dz²,
	// points, before the estimate moves: at a steady rate a gain error
	// cannot be seen.
	AdaptMinExcitation = 8.0
	// AdaptThreshold is how far from 1 the estimate must first be for the
	// scale to move: a model within it is trusted as identified (a step
	// test's timing error or noise must not move it), a plant beyond it has
	// drifted, and from then on the scale follows the estimate.
	AdaptThreshold = 0.3
	// AdaptMinScale and AdaptMaxScale bound the gain scale.
	AdaptMinScale, AdaptMaxScale = 0.25, 4.0
)

// Adaptation is the gain estimator's memory.
type Adaptation struct {
	// Scale is the plant's gain over the model's; 0 (a scale of 1) until
	// the estimate first left AdaptThreshold.
	Scale float64 `json:"k,omitempty"`
	// Szz and Szy are the forgotten sums of dz² and dz·dy.
	Szz float64 `json:"zz,omitempty"`
	Szy float64 `json:"zy,omitempty"`
	// Y and Z are the previous datapoint's measurement and nominal
	// prediction; Have is false when there is none (or it was pinned).
	Y    float64 `json:"y,omitempty"`
	Z    float64 `json:"z,omitempty"`
	Have bool    `json:"h,omitempty"`
}

// scale is the gain scale in force (1 without adaptation).
func (c *Controller) scale() float64 {
	if !c.Config.AdaptGain || c.State.Adapt.Scale <= 0 {
		return 1
	}
	return c.State.Adapt.Scale
}

// model is the feedforward model with the adapted gain (nil without
// feedforward).
func (c *Controller) model() *FOPDT {
	m := c.Config.Feedforward
	if m == nil || !c.Config.AdaptGain {
		return m
	}
	a := *m
	a.Gain *= c.scale()
	return &a
}

// adapt feeds the estimator a new datapoint y whose period ended at end on
// the controller's clock; z is what the nominal model predicts for it above
// its base from the rates applied. A datapoint at or above the ceiling (or
// the measurement's maximum) is pinned: its change says nothing of the gain.
// It returns the model with the gain in force; when the scale moved, the
// integrator takes up the feedforward's jump (bumpless).
func (c *Controller) adapt(y, z float64, end time.Duration) *FOPDT {
	cfg, s, a := &c.Config, &c.State, &c.State.Adapt
	if !cfg.AdaptGain || end <= s.SampleEnd {
		return c.model()
	}
	top := cfg.Ceiling
	if top <= 0 && cfg.MeasurementMax > cfg.MeasurementMin {
		top = cfg.MeasurementMax - 0.5
	}
	if top > 0 && y >= top {
		a.Have = false
		return c.model()
	}
	before := c.model()
	if a.Have {
		dz, dy := z-a.Z, y-a.Y
		a.Szz = AdaptForgetting*a.Szz + dz*dz
		a.Szy = AdaptForgetting*a.Szy + dz*dy
		if est := a.Szy / a.Szz; math.Sqrt(a.Szz) >= AdaptMinExcitation && (a.Scale > 0 || math.Abs(est-1) > AdaptThreshold) {
			a.Scale = clamp(est, AdaptMinScale, AdaptMaxScale)
		}
	}
	a.Y, a.Z, a.Have = y, z, true
	after := c.model()
	jump := saturate(after.Input(s.FilteredSetpoint)) - saturate(before.Input(s.FilteredSetpoint))
	s.Integral = finite(s.Integral-jump, s.Integral)
	return after
}
