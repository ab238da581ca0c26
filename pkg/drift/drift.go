package drift

import (
	"math"
	"slices"
	"time"
)

// The slope test fits the last Window datapoints below the ceiling as a
// level, which may step once where it jumped while the prediction held (a
// load starting or ending), plus a slope on the prediction: the slope is
// the relative gain error, and it decides when it is beyond GainError and
// beyond Significance standard errors on MinVotes datapoints in a row.
const (
	// Window is the number of datapoints the slope test spans.
	Window = 10
	// GainError is the relative gain error that counts as drift.
	GainError = 0.35
	// Significance is how many standard errors the slope must be away
	// from zero.
	Significance = 3.0
	// MinVotes is how many datapoints in a row must say the gain moved:
	// one datapoint that moved with the prediction carries the slope
	// alone, and a noise spike then looks like a gain error.
	MinVotes = 2
	// Strong: a slope beyond Strong times both GainError and Significance
	// standard errors decides on one datapoint (a noise spike that carries
	// the slope alone stays within it).
	Strong = 2.0
	// MinExcitation is the least change of the prediction over the
	// window, points (root of the summed squared changes), for a verdict:
	// at a steady rate a gain error cannot be told from a load.
	MinExcitation = 5.0
	// ceiling excludes datapoints at the signal's ceiling, whose residual
	// is cut (less the loop's noise band: a pinned signal with noise).
	ceiling = 99.5
)

// Reasons for State.ModelDrift (State.Reason).
const (
	// ReasonGain: the slope or change test says the gain moved.
	ReasonGain = "gain"
	// ReasonDeadTime: the dead-time test says the delay moved.
	ReasonDeadTime = "dead_time"
)

// Model is the first-order-plus-dead-time model the loop predicts its
// signal with: y = Base + Gain × (the rate delayed by DeadTime, lagged by
// Tau). Its fields and JSON are those of pkg/control's FOPDT.
type Model struct {
	// Gain is the static gain, points per message/s.
	Gain float64 `json:"gain"`
	// Tau is the time constant of the first-order lag.
	Tau time.Duration `json:"tau"`
	// DeadTime is the pure delay before the signal starts to respond.
	DeadTime time.Duration `json:"dead_time"`
	// Base is the signal at zero rate (the load the plant carries anyway).
	Base float64 `json:"base"`
}

// Response is the model's unit-gain answer to the rates the loop applied,
// with dead time dead: the rate delayed by dead and lagged by the model's
// time constant, averaged over [from, to) on the controller's clock (what
// a datapoint covering that period shows above the base, over the gain).
// pkg/control's FOPDT.Expected on the controller's State.Applied is one.
type Response func(dead, from, to time.Duration) float64

// Config is what the detector knows of the loop.
type Config struct {
	// NoiseBand is the loop's noise band, points: about three times the
	// signal's noise.
	NoiseBand float64 `json:"noise_band,omitempty"`
	// TickPeriod is the loop's tick period: datapoints further apart
	// than 1.5 times it (or the metric's period) have a gap between them.
	TickPeriod time.Duration `json:"tick_period,omitempty"`
}

// Input is one tick's datapoint and what the loop did.
type Input struct {
	// Model is the model the loop predicts with; a new one starts the
	// record over.
	Model Model
	// Response is the model's answer to the rates applied; nil when the
	// loop predicts with no model (the record is then emptied).
	Response Response
	// Clock is the controller's clock at the end of the tick.
	Clock time.Duration
	// Measurement is the datapoint's value, points; NaN and Inf are
	// ignored.
	Measurement float64
	// MeasurementAge is how long ago the datapoint's period ended, and
	// MeasurementPeriod how long the period is (the interval each
	// datapoint averages over).
	MeasurementAge    time.Duration
	MeasurementPeriod time.Duration
	// Fresh says the datapoint is new and valid; a stale one is recorded
	// only when it is at the ceiling.
	Fresh bool
	// Limited says the tick's rate is the consumers' report (the loop
	// limited by demand), an average over the tick.
	Limited bool
	// Now is the wall clock, recorded in State.Since.
	Now time.Time
}

// State is the record of how well the model predicts the measured signal.
type State struct {
	// Samples are the last ChangeWindow datapoints with the prediction.
	Samples []Sample `json:"samples,omitempty"`
	// ModelDrift is set when the residual says the plant moved; it stays
	// set until the model changes.
	ModelDrift bool `json:"model_drift,omitempty"`
	// GainRatio is the plant's gain over the model's, as last estimated
	// (0 before a verdict); SlopeSE the estimate's standard error.
	GainRatio float64 `json:"gain_ratio,omitempty"`
	SlopeSE   float64 `json:"slope_se,omitempty"`
	// Evidence is the change test's last figure: how much better a change
	// of gain explains the window than a load, in residual variances.
	Evidence float64 `json:"evidence,omitempty"`
	// Reason is what moved when ModelDrift was set: ReasonGain or
	// ReasonDeadTime.
	Reason string `json:"reason,omitempty"`
	// DeadTime is the plant's dead time as the dead-time test last
	// estimated it, DeadTimeEvidence how much better it explains the
	// window than the model's, in residual variances (0 while the window
	// holds no information about the delay).
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
	// whose rate the consumers' report gave (Input.Limited); 0: none.
	// That rate is an average over the tick, and when within it the
	// demand changed (a burst on an idle queue, a queue running dry) is
	// not known: a datapoint whose prediction draws on it is left out of
	// the record (a wrong instant reads as a gain or a dead time that
	// moved).
	LimitedAt time.Duration `json:"limited_at,omitempty"`
	// Model is the model the samples were predicted with.
	Model Model `json:"model,omitzero"`
}

// Sample is one datapoint: its end on the controller's clock, the measured
// value and the model's prediction above its base (points).
type Sample struct {
	End time.Duration `json:"t"`
	Y   float64       `json:"y"`
	Z   float64       `json:"z"`
	// Cut is set for a datapoint at the ceiling, or right after one: Y is
	// then a lower bound of the uncut signal.
	Cut bool `json:"cut,omitempty"`
}

// Clone returns a deep copy of s.
func (s State) Clone() State {
	s.Samples = slices.Clone(s.Samples)
	return s
}

// Detector is the drift detector of one loop: its Config and the State it
// keeps between ticks, plain data that round-trips through JSON.
type Detector struct {
	Config Config
	State  State
}

// Update adds the tick's datapoint to the record when it is new, fresh (or
// at the ceiling) and its prediction draws on no rate the consumers'
// report gave, keeps the last ChangeWindow of them, and runs the slope,
// change and dead-time tests on the window; any of them sets ModelDrift,
// with its Reason, until the model changes. A NaN or Inf measurement is
// ignored.
func (d *Detector) Update(in Input) {
	if in.Response == nil {
		d.State = State{}
		return
	}
	s, m := d.State.Clone(), in.Model
	if s.Model != m { // a new model: start over
		s = State{Model: m}
	}
	if in.Limited {
		s.LimitedAt = in.Clock
	}
	if d.record(&s, in) {
		s = d.judgeGain(s, in.MeasurementPeriod, in.Now)
		s = d.judgeDeadTime(s, in.Response, in.MeasurementPeriod, in.Now)
	}
	d.State = s
}

// record appends the datapoint of in to s.Samples and reports whether it
// did.
func (d *Detector) record(s *State, in Input) bool {
	m, nb, y := in.Model, d.Config.NoiseBand, in.Measurement
	end := in.Clock - in.MeasurementAge
	last := len(s.Samples) - 1
	if math.IsNaN(y) || math.IsInf(y, 0) || last >= 0 && end <= s.Samples[last].End {
		return false
	}
	if s.LimitedAt > 0 && s.LimitedAt > end-3*in.MeasurementPeriod-m.DeadTime-3*m.Tau {
		// Its prediction, with the model's dead time or with one up to two
		// periods longer (dead.go), draws on a rate measured over a tick:
		// left out.
		return false
	}
	z := m.Gain * in.Response(m.DeadTime, end-in.MeasurementPeriod, end)
	switch {
	case y >= ceiling-nb: // pinned, valid or not (noise took it above 100)
		// The uncut signal was at least about the ceiling.
		s.Pinned, s.PinnedEnd = true, end
		s.Samples = append(s.Samples, Sample{End: end, Y: ceiling - 2*nb, Z: z, Cut: true})
	case !in.Fresh:
		return false
	case s.Pinned && end-in.MeasurementPeriod <= s.PinnedEnd:
		// The datapoint right after a pinned one: the pinning may have
		// ended during its period, and its average is cut too.
		s.Samples = append(s.Samples, Sample{End: end, Y: y - nb, Z: z, Cut: true})
	default:
		s.Samples = append(s.Samples, Sample{End: end, Y: y, Z: z})
	}
	if len(s.Samples) > ChangeWindow {
		s.Samples = s.Samples[len(s.Samples)-ChangeWindow:]
	}
	return true
}

// judgeGain gives the record its verdict on the window: the slope test on
// the datapoints below the ceiling, and the change test on all of them.
// period is the metric's period.
func (d *Detector) judgeGain(s State, period time.Duration, now time.Time) State {
	base, nb := s.Model.Base, d.Config.NoiseBand
	uncut := make([]Sample, 0, len(s.Samples))
	for _, x := range s.Samples {
		if !x.Cut {
			uncut = append(uncut, x)
		}
	}
	uncut = uncut[max(0, len(uncut)-Window):]
	noise := math.Max(nb*nb/9, noiseFloor) // the band is about 3 times the noise
	ev, g, changed := changeTest(s.Samples, base, noise)
	changed = changed && ev > ChangeEvidence && math.Abs(g) > GainError
	s.Evidence = ev
	slope, se, ok := slopeTest(uncut, base, 3*max(period, d.Config.TickPeriod)/2)
	switch {
	case changed:
		s.GainRatio, s.Votes = 1+g, MinVotes
	case !ok:
		s.Votes = 0
	default:
		s.GainRatio, s.SlopeSE = 1+slope, se
		switch a := math.Abs(slope); {
		case a > Strong*GainError && a > Strong*Significance*se:
			s.Votes = MinVotes // beyond doubt: one datapoint decides
		case a > GainError && a > Significance*se:
			s.Votes++
		default:
			s.Votes = 0
		}
	}
	if !s.ModelDrift && s.Votes >= MinVotes {
		s.ModelDrift, s.Since, s.Reason = true, now, ReasonGain
	}
	return s
}

// slopeTest fits the residual r = y - base - z of the window as a level
// that may step once, at the last jump (a load starting or ending, or the
// plant changing: the residual moved by more than twice the prediction and
// beyond the noise, or moved across a gap in the datapoints), plus a slope
// on the prediction: r = a + c [after the jump] + b z. It returns b, the
// relative gain error, and its standard error; ok is false when the
// prediction moved too little within the levels for a verdict.
func slopeTest(s []Sample, base float64, maxGap time.Duration) (slope, se float64, ok bool) {
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
	if math.Sqrt(exc) < MinExcitation {
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
	return coef[2], math.Sqrt(math.Max(sse/float64(dof), noiseFloor) * inv), true
}

// noiseFloor is the least residual variance the standard error
// assumes (points²): a noiseless simulation must not make every slope
// significant.
const noiseFloor = 0.01

// lastJump returns the index of the first sample after the last jump of
// the residual r (0 when none).
func lastJump(s []Sample, r []float64, maxGap time.Duration) int {
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
func spread(s []Sample) float64 {
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
