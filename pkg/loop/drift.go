package loop

import (
	"math"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// Drift tracking: the loop compares each new datapoint with what its model
// (PARAMS ff_gain, ff_base, ff_tau, ff_dead_time) predicts from the rates
// it applied (the delay-aware integrator's history), and keeps the last
// DriftChangeWindow pairs, those at the CPU's ceiling as lower bounds; a
// datapoint whose prediction draws on a rate the consumers' report gave
// (the loop limited by demand: an average over the tick) is left out. A
// load from outside shifts the residual by a constant whatever the rate; a
// plant whose gain moved makes the residual follow the rate. Two tests read
// the window. The slope test fits the last DriftWindow datapoints below the
// ceiling as a level, which may step once where it jumped while the
// prediction held (a load starting or ending), plus a slope on the
// prediction: the slope is the relative gain error, and it decides when it
// is beyond DriftGainError and beyond DriftSignificance standard errors.
// The change test (driftjump.go) asks whether a change of gain at some
// instant explains the whole window better than a load. The dead-time test
// (driftdead.go) asks whether another dead time explains the answer to the
// rate's steps better than the model's. Any of them sets model_drift in
// STATE, with its reason, until the model is edited.
const (
	// DriftWindow is the number of datapoints the regression spans.
	DriftWindow = 10
	// DriftGainError is the relative gain error that counts as drift.
	DriftGainError = 0.35
	// DriftSignificance is how many standard errors the slope must be
	// away from zero.
	DriftSignificance = 3.0
	// DriftVotes is how many datapoints in a row must say the gain moved:
	// one datapoint that moved with the prediction carries the slope
	// alone, and a noise spike then looks like a gain error.
	DriftVotes = 2
	// DriftStrong: a slope beyond DriftStrong times both DriftGainError
	// and DriftSignificance standard errors decides on one datapoint (a
	// noise spike that carries the slope alone stays within it).
	DriftStrong = 2.0
	// DriftMinExcitation is the least change of the prediction over the
	// window, points (root of the summed squared changes), for a verdict:
	// at a steady rate a gain error cannot be told from a load.
	DriftMinExcitation = 5.0
	// driftPinned excludes datapoints at the CPU's ceiling, whose residual
	// is cut (less the loop's noise band: a pinned signal with noise).
	driftPinned = 99.5
)

// DriftState is the loop's record of how well its model predicts the
// measured signal.
type DriftState struct {
	// Samples are the last DriftWindow datapoints with the prediction.
	Samples []DriftSample `json:"samples,omitempty"`
	// ModelDrift is set when the residual says the plant moved; it stays
	// set until the model in PARAMS changes.
	ModelDrift bool `json:"model_drift,omitempty"`
	// GainRatio is the plant's gain over the model's, as last estimated
	// (0 before a verdict); SlopeSE the estimate's standard error.
	GainRatio float64 `json:"gain_ratio,omitempty"`
	SlopeSE   float64 `json:"slope_se,omitempty"`
	// Evidence is the change test's last figure: how much better a change
	// of gain explains the window than a load, in residual variances.
	Evidence float64 `json:"evidence,omitempty"`
	// Reason is what moved when ModelDrift was set: DriftReasonGain or
	// DriftReasonDeadTime.
	Reason string `json:"reason,omitempty"`
	// DeadTime is the plant's dead time as the dead-time test
	// (driftdead.go) last estimated it, DeadTimeEvidence how much better
	// it explains the window than the model's, in residual variances (0
	// while the window holds no information about the delay).
	DeadTime         time.Duration `json:"dead_time,omitempty"`
	DeadTimeEvidence float64       `json:"dead_time_evidence,omitempty"`
	// Since is when ModelDrift was set; Votes counts the datapoints in a
	// row that said the gain moved.
	Since time.Time `json:"since,omitzero"`
	Votes int       `json:"votes,omitempty"`
	// Pinned is set once a datapoint was at the ceiling, PinnedEnd is the
	// end of the last one: the datapoint after it is left out too.
	Pinned    bool          `json:"pinned,omitempty"`
	PinnedEnd time.Duration `json:"pinned_end,omitempty"`
	// LimitedAt is the controller's clock at the end of the last tick
	// interval whose rate the consumers' report gave (the loop limited by
	// demand: control.Output.ActualLimited); 0: none. That rate is an
	// average over the tick, and when within it the demand changed (a
	// burst on an idle queue, a queue running dry) is not known: a
	// datapoint whose prediction draws on it is left out of the record
	// (a wrong instant reads as a gain or a dead time that moved).
	LimitedAt time.Duration `json:"limited_at,omitempty"`
	// Model is the model the samples were predicted with.
	Model control.FOPDT `json:"model,omitzero"`
}

// DriftSample is one datapoint: its end on the controller's clock, the
// measured value and the model's prediction above its base (points).
type DriftSample struct {
	End time.Duration `json:"t"`
	Y   float64       `json:"y"`
	Z   float64       `json:"z"`
	// Cut is set for a datapoint at the ceiling, or right after one: Y is
	// then a lower bound of the uncut signal.
	Cut bool `json:"cut,omitempty"`
}

// Clone returns a deep copy of d.
func (d DriftState) Clone() DriftState {
	d.Samples = slices.Clone(d.Samples)
	return d
}

// trackDrift adds the tick's datapoint to the drift record when it is new,
// fresh, below the ceiling and the loop predicts with a model, and returns
// the record with its verdict. in is the controller's input, cs its state
// after the update and limited its Output.ActualLimited.
func trackDrift(d DriftState, p Params, cs control.State, in control.Input, limited, fresh bool, now time.Time) DriftState {
	m := p.Feedforward
	if m == nil || !p.DelayAware || len(cs.Applied) == 0 {
		return DriftState{}
	}
	d = d.Clone()
	if d.Model != *m { // a new model: start over
		d = DriftState{Model: *m}
	}
	if limited {
		d.LimitedAt = cs.Clock
	}
	end := cs.Clock - in.MeasurementAge
	last := len(d.Samples) - 1
	if last >= 0 && end <= d.Samples[last].End {
		return d
	}
	if d.LimitedAt > 0 && d.LimitedAt > end-3*in.MeasurementPeriod-m.DeadTime-3*m.Tau {
		// Its prediction, with the model's dead time or with one up to two
		// periods longer (driftdead.go), draws on a rate measured over a
		// tick: left out.
		return d
	}
	z := m.Gain * m.Expected(cs.Applied, end-in.MeasurementPeriod, end)
	switch {
	case in.Measurement >= driftPinned-p.NoiseBand: // pinned, valid or not (noise took it above 100)
		// The uncut signal was at least about the ceiling.
		d.Pinned, d.PinnedEnd = true, end
		d.Samples = append(d.Samples, DriftSample{End: end, Y: driftPinned - 2*p.NoiseBand, Z: z, Cut: true})
	case !fresh:
		return d
	case d.Pinned && end-in.MeasurementPeriod <= d.PinnedEnd:
		// The datapoint right after a pinned one: the pinning may have
		// ended during its period, and its average is cut too.
		d.Samples = append(d.Samples, DriftSample{End: end, Y: in.Measurement - p.NoiseBand, Z: z, Cut: true})
	default:
		d.Samples = append(d.Samples, DriftSample{End: end, Y: in.Measurement, Z: z})
	}
	if len(d.Samples) > DriftChangeWindow {
		d.Samples = d.Samples[len(d.Samples)-DriftChangeWindow:]
	}
	d = judgeDrift(d, m.Base, p, in, now)
	return judgeDeadTime(d, *m, cs.Applied, p, in.MeasurementPeriod, now)
}

// judgeDrift gives the record its verdict on the window: the slope test on
// the datapoints below the ceiling, and the change test on all of them.
func judgeDrift(d DriftState, base float64, p Params, in control.Input, now time.Time) DriftState {
	uncut := make([]DriftSample, 0, len(d.Samples))
	for _, x := range d.Samples {
		if !x.Cut {
			uncut = append(uncut, x)
		}
	}
	uncut = uncut[max(0, len(uncut)-DriftWindow):]
	noise := math.Max(p.NoiseBand*p.NoiseBand/9, driftNoiseFloor) // the band is about 3 times the noise
	ev, g, changed := driftChange(d.Samples, base, noise)
	changed = changed && ev > DriftChangeEvidence && math.Abs(g) > DriftGainError
	d.Evidence = ev
	slope, se, ok := driftSlope(uncut, base, 3*max(in.MeasurementPeriod, p.TickPeriod)/2)
	switch {
	case changed:
		d.GainRatio, d.Votes = 1+g, DriftVotes
	case !ok:
		d.Votes = 0
	default:
		d.GainRatio, d.SlopeSE = 1+slope, se
		switch a := math.Abs(slope); {
		case a > DriftStrong*DriftGainError && a > DriftStrong*DriftSignificance*se:
			d.Votes = DriftVotes // beyond doubt: one datapoint decides
		case a > DriftGainError && a > DriftSignificance*se:
			d.Votes++
		default:
			d.Votes = 0
		}
	}
	if !d.ModelDrift && d.Votes >= DriftVotes {
		d.ModelDrift, d.Since, d.Reason = true, now, DriftReasonGain
	}
	return d
}

// driftSlope fits the residual r = y - base - z of the window as a level
// that may step once, at the last jump (a load starting or ending, or the
// plant changing: the residual moved by more than twice the prediction and
// beyond the noise, or moved across a gap in the datapoints), plus a slope
// on the prediction: r = a + c [after the jump] + b z. It returns b, the
// relative gain error, and its standard error; ok is false when the
// prediction moved too little within the levels for a verdict.
func driftSlope(s []DriftSample, base float64, maxGap time.Duration) (slope, se float64, ok bool) {
	if len(s) < 4 {
		return 0, 0, false
	}
	r := make([]float64, len(s))
	for i, x := range s {
		r[i] = x.Y - base - x.Z
	}
	jump := lastJump(s, r, maxGap)
	var exc float64
	for _, seg := range [][2]int{{0, jump}, {jump, len(s)}} {
		exc += spread(s[seg[0]:seg[1]])
	}
	if math.Sqrt(exc) < DriftMinExcitation {
		return 0, 0, false
	}
	cols := [3][]float64{make([]float64, len(s)), make([]float64, len(s)), make([]float64, len(s))}
	for i, x := range s {
		cols[0][i], cols[2][i] = 1, x.Z
		if i >= jump && jump > 0 {
			cols[1][i] = 1
		}
	}
	coef, inv, dof := solve3(cols, r)
	if dof < 1 {
		return 0, 0, false
	}
	var sse float64
	for i := range r {
		e := r[i] - coef[0]*cols[0][i] - coef[1]*cols[1][i] - coef[2]*cols[2][i]
		sse += e * e
	}
	return coef[2], math.Sqrt(math.Max(sse/float64(dof), driftNoiseFloor) * inv), true
}

// driftNoiseFloor is the least residual variance the standard error
// assumes (points²): a noiseless simulation must not make every slope
// significant.
const driftNoiseFloor = 0.01

// lastJump returns the index of the first sample after the last jump of
// the residual r (0 when none).
func lastJump(s []DriftSample, r []float64, maxGap time.Duration) int {
	d := make([]float64, 0, len(r))
	for i := 1; i < len(r); i++ {
		if s[i].End-s[i-1].End <= maxGap {
			d = append(d, r[i]-r[i-1])
		}
	}
	thr := 2.0
	if len(d) > 0 {
		thr = math.Max(thr, 5*1.4826*medianAbs(d))
	}
	jump := 0
	for i := 1; i < len(r); i++ {
		dr, dz := math.Abs(r[i]-r[i-1]), math.Abs(s[i].Z-s[i-1].Z)
		gap := s[i].End-s[i-1].End > maxGap
		if dr > thr && (gap || dr > 2*dz) {
			jump = i
		}
	}
	return jump
}

// spread is the sum of squared deviations of the predictions from their
// mean.
func spread(s []DriftSample) float64 {
	if len(s) == 0 {
		return 0
	}
	m := 0.0
	for _, x := range s {
		m += x.Z
	}
	m /= float64(len(s))
	v := 0.0
	for _, x := range s {
		v += (x.Z - m) * (x.Z - m)
	}
	return v
}

// solve3 solves the least-squares problem of three columns (a column of
// zeros is left out) and returns the coefficients, the variance factor of
// the last one ((X'X)^-1 at [2][2]) and the residual degrees of freedom.
func solve3(cols [3][]float64, y []float64) (coef [3]float64, inv float64, dof int) {
	use := []int{0, 2}
	for _, v := range cols[1] {
		if v != 0 {
			use = []int{0, 1, 2}
			break
		}
	}
	n := len(use)
	var a [3][4]float64 // [X'X | X'y] over the used columns
	for i, ci := range use {
		for j, cj := range use {
			for k := range y {
				a[i][j] += cols[ci][k] * cols[cj][k]
			}
		}
		for k := range y {
			a[i][3] += cols[ci][k] * y[k]
		}
	}
	var m [3][3]float64
	for i := range n {
		for j := range n {
			m[i][j] = a[i][j]
		}
	}
	invM, ok := invert(m, n)
	if !ok {
		return coef, 0, 0
	}
	for i, ci := range use {
		for j := range n {
			coef[ci] += invM[i][j] * a[j][3]
		}
	}
	return coef, invM[n-1][n-1], len(y) - n
}

// invert inverts the n x n top-left block of m (n <= 3) by Gauss-Jordan.
func invert(m [3][3]float64, n int) ([3][3]float64, bool) {
	var inv [3][3]float64
	for i := range n {
		inv[i][i] = 1
	}
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		m[c], m[p] = m[p], m[c]
		inv[c], inv[p] = inv[p], inv[c]
		if math.Abs(m[c][c]) < 1e-9 {
			return inv, false
		}
		d := m[c][c]
		for j := range n {
			m[c][j] /= d
			inv[c][j] /= d
		}
		for r := range n {
			if r == c {
				continue
			}
			f := m[r][c]
			for j := range n {
				m[r][j] -= f * m[c][j]
				inv[r][j] -= f * inv[c][j]
			}
		}
	}
	return inv, true
}

// medianAbs is the median of |v|.
func medianAbs(v []float64) float64 {
	a := make([]float64, len(v))
	for i, x := range v {
		a[i] = math.Abs(x)
	}
	slices.Sort(a)
	return a[len(a)/2]
}
