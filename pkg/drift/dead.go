package drift

import (
	"math"
	"time"
)

// The dead-time test. A plant whose dead time moved answers each step of
// the rate late (or early): the datapoint that covers the step is off by
// about the gain times the step times the shift over the metric's period,
// the next ones hardly at all. At a steady rate nothing shows it; a
// setpoint edit, the answer to a load or a burst does. So the detector
// predicts the window again from the rates it applied (the delay-aware
// integrator's history) with the model's dead time, and with every dead
// time of a grid (a twelfth of the metric period apart, from 0 to the
// model's plus two periods) from every instant of the window on, each fit
// with a level and a load that may start at any instant (so that a load
// does not read as a delay; the gain is not free: a gain error plus a load
// would absorb a late answer), the datapoints at the ceiling as lower
// bounds as in the change test. The delay moved when the best dead time
// that differs from the model's by more than DeadTimeShift of the
// metric period explains the window better than the model's, and than the
// change test's best change of gain, by DeadTimeEvidence residual
// variances.
const (
	// DeadTimeEvidence is how much lower (in residual variances) the
	// sum of squares of the best other dead time must be than the model's.
	DeadTimeEvidence = 12.0
	// DeadTimeShift is the least change of dead time that counts, as
	// a fraction of the metric period.
	DeadTimeShift = 1.0 / 6
	// deadTimeGrid is the grid's step, as a fraction of the period.
	deadTimeGrid = 12
)

// judgeDeadTime runs the dead-time test on the record's window, with the
// model's response h to the rates applied and the metric's period, and
// sets ModelDrift when it fires (the gain tests, run first, keep their
// verdict).
func (d *Detector) judgeDeadTime(s State, h Response, period time.Duration, now time.Time) State {
	nb := d.Config.NoiseBand
	noise := math.Max(nb*nb/9, noiseFloor)
	shift := time.Duration(DeadTimeShift * float64(period))
	ev, dead, ok := deadTimeTest(s.Samples, h, s.Model, period, shift, noise)
	if !ok {
		s.DeadTimeEvidence = 0
		if s.Reason != ReasonDeadTime {
			s.DeadTime = 0 // no estimate without a rate step in the window
		}
		return s
	}
	s.DeadTimeEvidence, s.DeadTime = ev, dead
	if !s.ModelDrift && ev > DeadTimeEvidence {
		s.ModelDrift, s.Since, s.Reason = true, now, ReasonDeadTime
	}
	return s
}

// deadTimeTest tests the window s for a change of the plant's dead time by
// more than shift. It returns the evidence (the sum of squares with the
// model's dead time, or of the best change of gain if lower, less that of
// the best dead time beyond shift from it, from the best instant on, over
// the residual's variance, at least noise)
// and that dead time; ok is false when the window is too short or no such
// dead time fits it better.
func deadTimeTest(s []Sample, h Response, m Model, period, shift time.Duration, noise float64) (evidence float64, dead time.Duration, ok bool) {
	n, uncut := len(s), 0
	y, cut := make([]float64, n), make([]bool, n)
	for i, x := range s {
		y[i], cut[i] = x.Y-m.Base, x.Cut
		if !x.Cut {
			uncut++
		}
	}
	if uncut < 6 || period <= 0 || h == nil {
		return 0, 0, false
	}
	z0 := predictWindow(s, h, m, m.DeadTime, period)
	null, ok := fitDelay(y, z0, cut)
	if !ok {
		return 0, 0, false
	}
	best, step := null, period/deadTimeGrid
	z := make([]float64, n)
	for c := time.Duration(0); c <= m.DeadTime+2*period; c += step {
		if (c - m.DeadTime).Abs() <= shift {
			continue
		}
		zc := predictWindow(s, h, m, c, period)
		for j := range n {
			// From j on the plant answers with dead time c; a j that
			// changes nothing from j+1's fit is left out.
			if j > 0 && math.Abs(zc[j-1]-z0[j-1]) < 1e-9 {
				continue
			}
			copy(z, z0[:j])
			copy(z[j:], zc[j:])
			if sse, ok := fitDelay(y, z, cut); ok && sse < best {
				best, dead = sse, c
			}
		}
	}
	// A change of gain may answer a step otherwise than the model: the
	// dead time must explain the window better than it too.
	r0 := make([]float64, n)
	for i := range y {
		r0[i] = y[i] - z0[i]
	}
	if _, gainSSE, _, ok := changeFits(r0, z0, cut); ok {
		null = math.Min(null, gainSSE)
	}
	if best >= null {
		return 0, 0, false
	}
	v := math.Max(best/float64(uncut-3), noise)
	return (null - best) / v, dead, true
}

// predictWindow is the model's prediction (points above its base) of each
// datapoint of s, with dead time dead, from its response h to the rates
// applied.
func predictWindow(s []Sample, h Response, m Model, dead, period time.Duration) []float64 {
	z := make([]float64, len(s))
	for i, x := range s {
		z[i] = m.Gain * h(dead, x.End-period, x.End)
	}
	return z
}

// fitDelay is the least sum of squares of y - z fitted as a level and a
// load that may start at any instant (or none), the cut rows as lower
// bounds (the gain stays the model's: see the file's comment).
func fitDelay(y, z []float64, cut []bool) (float64, bool) {
	n := len(y)
	r, one := make([]float64, n), make([]float64, n)
	for i := range y {
		r[i], one[i] = y[i]-z[i], 1
	}
	best, found := math.Inf(1), false
	if _, sse, ok := fitCut([][]float64{one}, r, cut); ok {
		best, found = sse, true
	}
	for j := 1; j < n; j++ {
		if count(cut[j:], false) < 1 || count(cut[:j], false) < 1 {
			continue
		}
		step := make([]float64, n)
		for i := j; i < n; i++ {
			step[i] = 1
		}
		if _, sse, ok := fitCut([][]float64{one, step}, r, cut); ok && sse < best {
			best, found = sse, true
		}
	}
	return best, found
}
