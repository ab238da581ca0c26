package control

import (
	"fmt"
	"math"
	"time"
)

// StaleAction says what a loop does while its measurement is missing, stale
// or invalid (the controller itself only holds; see Output.Held).
type StaleAction string

const (
	// StaleHold keeps the last output.
	StaleHold StaleAction = "hold"
	// StaleDecay moves the output exponentially toward the safe rate.
	StaleDecay StaleAction = "decay"
	// StaleFailClosed drops the output to the safe rate at once.
	StaleFailClosed StaleAction = "fail-closed"
)

// StalePolicy is a loop's stale-metric policy.
type StalePolicy struct {
	// Action is hold, decay or fail-closed.
	Action StaleAction `json:"action"`
	// SafeRate is the rate that cannot hurt the destination.
	SafeRate float64 `json:"safe_rate"`
	// DecayTime is the time constant of the decay toward SafeRate.
	DecayTime time.Duration `json:"decay,omitempty"`
	// Grace is how long a measurement may be stale before the policy acts;
	// within it the output is held.
	Grace time.Duration `json:"grace,omitempty"`
}

// Validate reports whether p is usable.
func (p StalePolicy) Validate() error {
	switch p.Action {
	case StaleHold, StaleFailClosed:
	case StaleDecay:
		if p.DecayTime <= 0 {
			return &StaleFieldError{"DecayTime", fmt.Sprintf("stale policy decay: decay time %v must be positive", p.DecayTime)}
		}
	default:
		return &StaleFieldError{"Action", fmt.Sprintf("stale policy %q: want %q, %q or %q", p.Action, StaleHold, StaleDecay, StaleFailClosed)}
	}
	if math.IsNaN(p.SafeRate) || math.IsInf(p.SafeRate, 0) || p.SafeRate < 0 {
		return &StaleFieldError{"SafeRate", fmt.Sprintf("stale policy safe rate %v: must be a finite number >= 0", p.SafeRate)}
	}
	if p.Grace < 0 {
		return &StaleFieldError{"Grace", fmt.Sprintf("stale policy grace %v: must not be negative", p.Grace)}
	}
	return nil
}

// StaleFieldError is a StalePolicy that Validate refused: Field names the
// policy's field at fault (Action, DecayTime, SafeRate or Grace).
type StaleFieldError struct {
	Field  string
	Reason string
}

func (e *StaleFieldError) Error() string { return e.Reason }

// Apply returns the rate to send when the measurement has been unusable for
// staleFor, the last output was last and dt passed since it was sent. Decay
// and fail-closed never raise the rate above last.
func (p StalePolicy) Apply(last float64, staleFor, dt time.Duration) float64 {
	if staleFor <= p.Grace || p.Action == StaleHold {
		return last
	}
	target := math.Min(p.SafeRate, last)
	switch p.Action {
	case StaleFailClosed:
		return target
	case StaleDecay:
		a := math.Exp(-dt.Seconds() / p.DecayTime.Seconds())
		return target + (last-target)*a
	}
	return last
}
