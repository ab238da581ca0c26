package sim

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// Plant is the destination: its CPU follows the processed rate through a
// dead time and a first-order lag, on top of its base load and of outside
// disturbances, saturating at 0 and 100 %.
type Plant struct {
	model control.FOPDT
	dt    time.Duration
	delay []float64 // processed rate over the last DeadTime, ring buffer
	head  int
	x     float64 // lag state, points of CPU above base
	last  float64 // the newest input, for SetModel
}

// NewPlant returns a plant at steady state with input u0, integrated with
// step dt.
func NewPlant(m control.FOPDT, dt time.Duration, u0 float64) *Plant {
	n := int(m.DeadTime / dt)
	p := &Plant{model: m, dt: dt, delay: make([]float64, n), x: m.Gain * u0, last: u0}
	for i := range p.delay {
		p.delay[i] = u0
	}
	return p
}

// Step advances the plant by one step with processed rate u (messages/s)
// and outside load d (points), and returns the true CPU at the end of it.
func (p *Plant) Step(u, d float64) float64 {
	in := u
	p.last = u
	if len(p.delay) > 0 {
		in = p.delay[p.head]
		p.delay[p.head] = u
		p.head = (p.head + 1) % len(p.delay)
	}
	target := p.model.Gain * in
	if tau := p.model.Tau; tau > 0 {
		a := math.Exp(-p.dt.Seconds() / tau.Seconds())
		p.x = target + (p.x-target)*a
	} else {
		p.x = target
	}
	return p.CPU(d)
}

// CPU returns the plant's true CPU with outside load d.
func (p *Plant) CPU(d float64) float64 {
	return math.Max(0, math.Min(100, p.model.Base+p.x+d))
}
