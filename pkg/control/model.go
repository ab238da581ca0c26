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
// feedforward and the Smith predictor use.
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

// Validate reports whether the model can drive a controller.
func (m FOPDT) Validate() error {
	switch {
	case math.IsNaN(m.Gain) || math.IsInf(m.Gain, 0) || m.Gain <= 0:
		return fmt.Errorf("model gain %v: must be a positive number", m.Gain)
	case m.Tau < 0:
		return fmt.Errorf("model time constant %v: must not be negative", m.Tau)
	case m.DeadTime < 0:
		return fmt.Errorf("model dead time %v: must not be negative", m.DeadTime)
	case math.IsNaN(m.Base) || math.IsInf(m.Base, 0):
		return fmt.Errorf("model base %v: must be a finite number", m.Base)
	}
	return nil
}

// Input returns the steady-state input that holds the output at y: the static
// inverse of the model, used as reference feedforward.
func (m FOPDT) Input(y float64) float64 { return (y - m.Base) / m.Gain }

// Output returns the steady-state output for input u.
func (m FOPDT) Output(u float64) float64 { return m.Base + m.Gain*u }
