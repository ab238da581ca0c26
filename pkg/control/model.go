package control

import (
	"fmt"
	"math"
	"time"
)

// FOPDT is a first-order-plus-dead-time model of a plant whose output (CPU
// utilization, percent) responds to its input (consumption rate, messages/s):
//
//	y(t) = Base + Gain * u(t - DeadTime) filtered by 1 / (Tau s + 1)
//
// It is what a step test identifies and what tuning rules, the reference
// feedforward, the delay-aware integrator and drift detection (pkg/drift)
// use.
type FOPDT struct {
	// Gain is the static gain, points of CPU per message/s.
	Gain float64 `json:"gain"`
	// Tau is the time constant of the first-order lag.
	Tau time.Duration `json:"tau"`
	// DeadTime is the pure delay before the output starts to respond.
	DeadTime time.Duration `json:"dead_time"`
	// Base is the output at zero input (the load the plant carries anyway).
	Base float64 `json:"base"`
}

// Validate reports whether the model can drive a controller; a refusal is a
// *ModelFieldError. The feedforward divides by the gain: a gain so small that
// its inverse, or the base over it, overflows is refused.
func (m FOPDT) Validate() error {
	switch {
	case math.IsNaN(m.Gain) || math.IsInf(m.Gain, 0) || m.Gain <= 0:
		return &ModelFieldError{"Gain", fmt.Sprintf("model gain %v: must be a positive number", m.Gain)}
	case m.Tau < 0:
		return &ModelFieldError{"Tau", fmt.Sprintf("model time constant %v: must not be negative", m.Tau)}
	case m.DeadTime < 0:
		return &ModelFieldError{"DeadTime", fmt.Sprintf("model dead time %v: must not be negative", m.DeadTime)}
	case math.IsNaN(m.Base) || math.IsInf(m.Base, 0):
		return &ModelFieldError{"Base", fmt.Sprintf("model base %v: must be a finite number", m.Base)}
	case math.IsInf(1/m.Gain, 0):
		return &ModelFieldError{"Gain", fmt.Sprintf("model gain %v: too small, its inverse (the feedforward's messages/s per point) overflows", m.Gain)}
	case math.IsInf(m.Base/m.Gain, 0):
		return &ModelFieldError{"Base", fmt.Sprintf("model base %v over gain %v overflows: the feedforward rate would not be a number", m.Base, m.Gain)}
	}
	return nil
}

// ModelFieldError is an FOPDT that Validate refused: Field names the model's
// field at fault (Gain, Tau, DeadTime or Base).
type ModelFieldError struct {
	Field  string
	Reason string
}

func (e *ModelFieldError) Error() string { return e.Reason }

// Input returns the steady-state input that holds the output at y: the static
// inverse of the model, used as reference feedforward.
func (m FOPDT) Input(y float64) float64 { return (y - m.Base) / m.Gain }

// Output returns the steady-state output for input u.
func (m FOPDT) Output(u float64) float64 { return m.Base + m.Gain*u }
