package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// PlantChange changes the true plant at At without telling the controller:
// the message mix, the cache or another tenant moved the destination's gain,
// lag or dead time. A zero Gain and a nil Tau or DeadTime keep the value in
// force.
type PlantChange struct {
	At       time.Duration  `json:"at"`
	Gain     float64        `json:"gain,omitempty"`
	Tau      *time.Duration `json:"tau,omitempty"`
	DeadTime *time.Duration `json:"dead_time,omitempty"`
}

// apply returns m with the change's values.
func (c PlantChange) apply(m control.FOPDT) control.FOPDT {
	if c.Gain != 0 {
		m.Gain = c.Gain
	}
	if c.Tau != nil {
		m.Tau = *c.Tau
	}
	if c.DeadTime != nil {
		m.DeadTime = *c.DeadTime
	}
	return m
}

// String formats the change as the --plant-change flag reads it.
func (c PlantChange) String() string {
	s := fmt.Sprint(c.At) + "="
	sep := ""
	if c.Gain != 0 {
		s, sep = s+fmt.Sprintf("gain=%g", c.Gain), ","
	}
	if c.Tau != nil {
		s, sep = s+sep+"tau="+c.Tau.String(), ","
	}
	if c.DeadTime != nil {
		s += sep + "dead-time=" + c.DeadTime.String()
	}
	return s
}

// PlantAt returns the true plant in force at t: Plant with every change at
// or before t applied in time order.
func (s Scenario) PlantAt(t time.Duration) control.FOPDT {
	m := s.Plant
	applied := make([]bool, len(s.PlantChanges))
	for {
		next := -1
		for i, c := range s.PlantChanges {
			if !applied[i] && c.At <= t && (next < 0 || c.At < s.PlantChanges[next].At) {
				next = i
			}
		}
		if next < 0 {
			return m
		}
		applied[next] = true
		m = s.PlantChanges[next].apply(m)
	}
}

// validatePlantChanges checks every plant change and the plant each one
// leaves in force.
func (s Scenario) validatePlantChanges() error {
	for _, c := range s.PlantChanges {
		switch {
		case c.At < 0:
			return fmt.Errorf("plant change %v: time must be >= 0", c)
		case c.Gain == 0 && c.Tau == nil && c.DeadTime == nil:
			return fmt.Errorf("plant change at %v: changes nothing (want gain, tau or dead-time)", c.At)
		case math.IsNaN(c.Gain) || math.IsInf(c.Gain, 0) || c.Gain < 0:
			return fmt.Errorf("plant change %v: gain must be a finite number > 0", c)
		case c.DeadTime != nil && *c.DeadTime > time.Hour:
			return fmt.Errorf("plant change %v: dead time at most 1h", c)
		}
		if err := s.PlantAt(c.At).Validate(); err != nil {
			return fmt.Errorf("plant change %v: %w", c, err)
		}
	}
	return nil
}

// SetModel changes the plant's gain, lag and dead time from the next step
// on, keeping its state: the lag continues from where it is toward the new
// gain's target, and the dead time's buffer keeps the rates already in it
// (a longer dead time repeats the oldest, a shorter one drops the oldest).
func (p *Plant) SetModel(m control.FOPDT) {
	if m == p.model {
		return
	}
	n := int(m.DeadTime / p.dt)
	if n != len(p.delay) {
		old := make([]float64, 0, len(p.delay))
		for i := range p.delay { // oldest first
			old = append(old, p.delay[(p.head+i)%len(p.delay)])
		}
		p.delay, p.head = resize(old, n, p.last), 0
	}
	p.model = m
}

// resize returns the last n values of old, padded in front with its first
// value (last when old is empty).
func resize(old []float64, n int, last float64) []float64 {
	out := make([]float64, n)
	if len(old) >= n {
		copy(out, old[len(old)-n:])
		return out
	}
	first := last
	if len(old) > 0 {
		first = old[0]
	}
	pad := n - len(old)
	for i := range pad {
		out[i] = first
	}
	copy(out[pad:], old)
	return out
}

// EventPlantChange is the kind of the event a plant change adds.
const EventPlantChange = "plant-change"
