package control

import "time"

// Expected returns the model's unit-gain response (points per message/s
// times the rate, without Base and Gain) to the input history h, averaged
// over [from, to) on the controller's clock: what a datapoint covering that
// period should show, divided by the gain, above the base load. It is what
// the delay-aware integrator compares each datapoint with (State.Applied is
// h), exported for the loop's drift tracking.
func (m FOPDT) Expected(h []Segment, from, to time.Duration) float64 {
	return m.expected(h, from, to)
}
