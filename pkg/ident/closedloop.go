package ident

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// ErrNoExcitation reports that a closed-loop history cannot identify the
// plant: the input hardly moved, or the output did not tell the gain apart
// from the base load. The wrapping error says which, with the figures.
var ErrNoExcitation = errors.New("the history holds too little excitation to identify the plant")

// History is a loop's closed-loop record, one sample per controller tick: at
// tick time T[i] (seconds) the newest datapoint was Y[i] (percent CPU, NaN
// when missing or stale) and the consumers had processed U[i] messages/s
// since the previous tick (NaN when unknown). U[0] is taken to have held
// before T[0].
type History struct {
	T []float64 `json:"t_s"`
	U []float64 `json:"input"`
	Y []float64 `json:"output"`
}

// Len returns the number of samples.
func (h History) Len() int { return len(h.T) }

// ClosedLoopOptions describe the measurement, which the loop knows from its
// configuration and the fit does not estimate.
type ClosedLoopOptions struct {
	// MetricPeriod is the averaging period of a datapoint.
	MetricPeriod time.Duration
	// PipelineDelay is how long before the tick the middle of the newest
	// datapoint's period lies, on average: metric period / 2 + publication
	// delay + tick / 2 (the loop's dead time without the plant's).
	PipelineDelay time.Duration
	// MaxDisturbances is the largest number of unmeasured step
	// disturbances the fit may estimate (default 4; negative: none).
	MaxDisturbances int
}

// StepDisturbance is an unmeasured load the fit found in the history: Size
// points of CPU from From to To (seconds, the history's clock).
type StepDisturbance struct {
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	Size  float64 `json:"size"`
}

// Excitation says whether the history can identify the plant.
type Excitation struct {
	OK bool `json:"excitation_ok"`
	// Reason says why not, in words an operator can act on.
	Reason string `json:"reason,omitempty"`
	// InputRange is the spread of the processed rate (5th to 95th
	// percentile), messages/s; InputMean its mean.
	InputRange float64 `json:"input_range"`
	InputMean  float64 `json:"input_mean"`
}

// ClosedLoopResult is a model identified from a closed-loop history.
type ClosedLoopResult struct {
	Model control.FOPDT
	// GainSE and BaseSE are the standard errors of the gain and the base
	// load (least squares, at the fitted lag and dead time).
	GainSE, BaseSE float64
	// LagDeadTime is an approximate 95 % interval of the plant's lag plus
	// dead time, from the profile of the fit's cost.
	LagDeadTime [2]time.Duration
	// RMSE is the fit's root-mean-square residual, points; Samples the
	// number of samples fitted.
	RMSE    float64
	Samples int
	// Disturbances are the unmeasured loads the fit estimated beside the
	// plant (a closed loop hides them in its input otherwise).
	Disturbances []StepDisturbance
	Excitation   Excitation
}

// Closed-loop fit limits.
const (
	// MinClosedLoopSamples is the fewest usable samples FitClosedLoop
	// accepts.
	MinClosedLoopSamples = 20
	// MinInputSpread is the least spread of the processed rate, relative to
	// its mean, that can tell the gain from the base load.
	MinInputSpread = 0.05
	// MaxGainRelSE is the largest relative standard error of the gain for
	// which a model is proposed.
	MaxGainRelSE = 0.10
	// saturatedAbove excludes datapoints at the CPU's ceiling: a pinned
	// measurement hides the size of the error.
	saturatedAbove = 99.5
)

// FitClosedLoop identifies a FOPDT model of the plant from a closed-loop
// history by output error: the model's response to the processed rate is
// simulated exactly, averaged over each datapoint's period placed
// PipelineDelay before its tick, and compared with the datapoint. Base and
// gain (and the sizes of unmeasured step disturbances) are linear and solved
// in closed form; lag and dead time are searched on a grid refined by a
// simplex. A disturbance is added where the residuals hold one sign for
// three ticks or more, and kept only if it explains them. Since the
// controller reacts to a datapoint only after it is published, white
// measurement noise does not bias the fit (Ljung, System Identification,
// 2nd ed., 1999, sec. 13.4, the direct method).
//
// It returns an error wrapping ErrNoExcitation, with the result's figures
// so far, when the history cannot identify the plant, and another error
// when the history or the options are unusable.
func FitClosedLoop(h History, opt ClosedLoopOptions) (ClosedLoopResult, error) {
	p, err := newClosedLoop(h, opt)
	if err != nil {
		return ClosedLoopResult{}, err
	}
	res := ClosedLoopResult{Samples: len(p.rows)}
	res.Excitation = p.inputExcitation()
	if !res.Excitation.OK {
		return res, fmt.Errorf("%s: %w", res.Excitation.Reason, ErrNoExcitation)
	}
	maxDist := opt.MaxDisturbances
	if maxDist == 0 {
		maxDist = 4
	}
	fit := p.search()
	for len(p.dist) < maxDist {
		if !p.addDisturbance(fit) {
			break
		}
		fit = p.search()
	}
	return p.result(fit, res)
}

// clFit is one least-squares solution at a lag and dead time.
type clFit struct {
	tau, theta float64
	sse        float64
	coef       []float64 // base, gain, disturbance sizes
	cov        []float64 // (X'X)^-1, row-major
	// coef holds base, gain, the disturbance sizes, the initial state.
	resid []float64
}

// closedLoop is the fit's problem: the input on a fine time grid, the
// window of fine samples each datapoint averages, the disturbances so far.
type closedLoop struct {
	dt     float64   // fine step, seconds
	fine   []float64 // fine times
	u      []float64 // input acting on [fine[j], fine[j]+dt), 0 before the history
	pre    []float64 // 1 before the history, 0 in it: the unknown initial state
	rows   []clRow   // the usable datapoints
	dist   []StepDisturbance
	xbuf   []float64
	period float64
	span   float64 // the history's length, seconds
}

// clRow is a usable datapoint: its value and the fine samples its period
// covers.
type clRow struct {
	y    float64
	a, b int
}

// newClosedLoop checks the history and lays the input on the fine grid.
func newClosedLoop(h History, opt ClosedLoopOptions) (*closedLoop, error) {
	n := h.Len()
	switch {
	case len(h.U) != n || len(h.Y) != n:
		return nil, fmt.Errorf("history has %d times, %d inputs and %d outputs: lengths differ", n, len(h.U), len(h.Y))
	case opt.MetricPeriod <= 0 || opt.PipelineDelay < opt.MetricPeriod/2:
		return nil, fmt.Errorf("metric period %v and pipeline delay %v: the period must be positive and the delay at least half of it", opt.MetricPeriod, opt.PipelineDelay)
	}
	for i := 1; i < n; i++ {
		if !(h.T[i] > h.T[i-1]) {
			return nil, fmt.Errorf("sample %d: time %v s after %v s: %w", i, h.T[i], h.T[i-1], ErrTimeOrder)
		}
	}
	period, lag := opt.MetricPeriod.Seconds(), opt.PipelineDelay.Seconds()
	p := &closedLoop{period: period, dt: math.Max(1, period/12)}
	if n == 0 {
		return nil, fmt.Errorf("history is empty: %w", ErrTooFewSamples)
	}
	p.span = h.T[n-1] - h.T[0]
	start := h.T[0] - lag - period - 600 // room for the plant to settle
	u := fillInput(h.U)
	for t, i := start, 0; t < h.T[n-1]; t += p.dt {
		for i < n && h.T[i] <= t { // U[i] acts on (T[i-1], T[i]]
			i++
		}
		p.fine = append(p.fine, t)
		if i == 0 {
			p.u, p.pre = append(p.u, 0), append(p.pre, 1)
		} else {
			p.u, p.pre = append(p.u, u[min(i, n-1)]), append(p.pre, 0)
		}
	}
	for i := range n {
		y, mid := h.Y[i], h.T[i]-lag
		if math.IsNaN(y) || math.IsInf(y, 0) || y >= saturatedAbove || math.IsNaN(h.U[i]) {
			continue
		}
		a := int(math.Round((mid - period/2 - start) / p.dt))
		b := int(math.Round((mid + period/2 - start) / p.dt))
		p.rows = append(p.rows, clRow{y: y, a: max(a, 0), b: min(b, len(p.fine))})
	}
	if len(p.rows) < MinClosedLoopSamples {
		return nil, fmt.Errorf("history has %d usable samples (a datapoint and a processed rate, below the CPU's ceiling), need at least %d: %w",
			len(p.rows), MinClosedLoopSamples, ErrTooFewSamples)
	}
	return p, nil
}

// fillInput replaces unknown rates by the last known one (the first known
// one before it; 0 when none is known).
func fillInput(u []float64) []float64 {
	out := slices.Clone(u)
	last := math.NaN()
	for _, v := range u {
		if !math.IsNaN(v) {
			last = v
			break
		}
	}
	for i, v := range out {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			out[i] = last
		} else {
			last = v
		}
	}
	for i := range out {
		if math.IsNaN(out[i]) {
			out[i] = 0
		}
	}
	return out
}

// inputExcitation checks that the processed rate moved enough to tell the
// gain from the base load.
func (p *closedLoop) inputExcitation() Excitation {
	var us []float64
	for _, r := range p.rows {
		us = append(us, p.u[max(r.b-1, 0)])
	}
	slices.Sort(us)
	lo, hi := us[len(us)*5/100], us[len(us)*95/100]
	e := Excitation{OK: true, InputRange: hi - lo, InputMean: mean(us)}
	if e.InputRange < MinInputSpread*math.Max(math.Abs(e.InputMean), 1) {
		e.OK = false
		e.Reason = fmt.Sprintf("for 90 %% of the ticks the processed rate stayed within %.3g messages/s (%.1f %% of its mean %.4g; need %.0f %%): "+
			"with a constant input the gain cannot be told from the base load; wait for a setpoint edit, a burst or a disturbance, or run an experiment",
			e.InputRange, 100*e.InputRange/math.Max(math.Abs(e.InputMean), 1), e.InputMean, 100*MinInputSpread)
	}
	return e
}

// columns returns the regressors of every usable datapoint at lag tau and
// dead time theta: 1, the model's unit-gain response averaged over the
// datapoint's period, each disturbance's share of that period, and last the
// response to the input before the history began (unknown: its
// coefficient is gain times that input).
func (p *closedLoop) columns(tau, theta float64) [][]float64 {
	cols := make([][]float64, 3+len(p.dist))
	for k := range cols {
		cols[k] = make([]float64, len(p.rows))
	}
	p.windowed(respond(tau, theta, p.fine, p.u, p.xbuf), cols[1])
	p.windowed(respond(tau, theta, p.fine, p.pre, p.xbuf), cols[len(cols)-1])
	for i, r := range p.rows {
		w := float64(max(r.b-r.a, 1))
		cols[0][i] = 1
		for k, d := range p.dist {
			cols[2+k][i] = p.overlap(r, d) / w
		}
	}
	return cols
}

// windowed writes into out the mean of x over each datapoint's period.
func (p *closedLoop) windowed(x, out []float64) {
	p.xbuf = x
	cum := make([]float64, len(x)+1)
	for j, v := range x {
		cum[j+1] = cum[j] + v
	}
	for i, r := range p.rows {
		out[i] = (cum[r.b] - cum[r.a]) / float64(max(r.b-r.a, 1))
	}
}

// overlap counts the fine samples of row r's period inside disturbance d.
func (p *closedLoop) overlap(r clRow, d StepDisturbance) float64 {
	n := 0.0
	for j := r.a; j < r.b; j++ {
		if t := p.fine[j]; t >= d.FromS && t < d.ToS {
			n++
		}
	}
	return n
}

// solve is the least-squares fit at lag tau and dead time theta (negative
// values count as zero).
func (p *closedLoop) solve(tau, theta float64) clFit {
	tau, theta = math.Max(0, tau), math.Max(0, theta)
	cols := p.columns(tau, theta)
	y := make([]float64, len(p.rows))
	for i, r := range p.rows {
		y[i] = r.y
	}
	coef, cov := leastSquares(cols, y)
	f := clFit{tau: tau, theta: theta, coef: coef, cov: cov, resid: make([]float64, len(y))}
	for i := range y {
		pred := 0.0
		for k, c := range cols {
			pred += coef[k] * c[i]
		}
		f.resid[i] = y[i] - pred
		f.sse += f.resid[i] * f.resid[i]
	}
	return f
}

// leastSquares solves min |y - sum_k coef[k] cols[k]|^2 by the normal
// equations and returns the coefficients and (X'X)^-1. A singular column
// (a disturbance that covers no datapoint) gets coefficient 0.
func leastSquares(cols [][]float64, y []float64) (coef, inv []float64) {
	m := len(cols)
	a := make([]float64, m*2*m) // [X'X | I]
	rhs := make([]float64, m)
	for i := range m {
		for j := range m {
			s := 0.0
			for r := range y {
				s += cols[i][r] * cols[j][r]
			}
			a[i*2*m+j] = s
		}
		a[i*2*m+m+i] = 1
		for r := range y {
			rhs[i] += cols[i][r] * y[r]
		}
	}
	gaussJordan(a, m)
	inv = make([]float64, m*m)
	coef = make([]float64, m)
	for i := range m {
		for j := range m {
			inv[i*m+j] = a[i*2*m+m+j]
			coef[i] += inv[i*m+j] * rhs[j]
		}
	}
	return coef, inv
}

// gaussJordan reduces the m x 2m matrix a = [A | I] to [I | A^-1] with
// partial pivoting; a pivot too small to divide by leaves its row zero.
func gaussJordan(a []float64, m int) {
	w := 2 * m
	for c := range m {
		piv := c
		for r := c + 1; r < m; r++ {
			if math.Abs(a[r*w+c]) > math.Abs(a[piv*w+c]) {
				piv = r
			}
		}
		for k := range w {
			a[c*w+k], a[piv*w+k] = a[piv*w+k], a[c*w+k]
		}
		d := a[c*w+c]
		if math.Abs(d) < 1e-12 {
			for k := range w {
				a[c*w+k] = 0
			}
			continue
		}
		for k := range w {
			a[c*w+k] /= d
		}
		for r := range m {
			if r == c || a[r*w+c] == 0 {
				continue
			}
			f := a[r*w+c]
			for k := range w {
				a[r*w+k] -= f * a[c*w+k]
			}
		}
	}
}

// clTaus and the dead-time grid are where the search starts: lags from none
// to a quarter of an hour, dead times up to four minutes. The search never
// leaves these bounds, nor the history's span.
var clTaus = []float64{0, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 360, 480, 720, 900}

const (
	clMaxTau   = 900.0
	clMaxTheta = 240.0
)

// search finds the lag and dead time of least cost: the grid, then a simplex
// from its best point, both within the bounds (clMaxTau, clMaxTheta, the
// history's span).
func (p *closedLoop) search() clFit {
	maxTau, maxTheta := math.Min(clMaxTau, p.span), math.Min(clMaxTheta, p.span)
	best := clFit{sse: math.Inf(1)}
	for _, tau := range clTaus {
		for theta := 0.0; theta <= maxTheta && tau <= maxTau; theta += p.dt {
			if f := p.solve(tau, theta); f.sse < best.sse {
				best = f
			}
		}
	}
	bound := func(q [2]float64) (float64, float64) {
		return math.Min(math.Abs(q[0]), maxTau), math.Min(math.Abs(q[1]), maxTheta)
	}
	obj := func(q [2]float64) float64 { return p.solve(bound(q)).sse }
	q := nelderMead(obj, [2]float64{best.tau, best.theta}, [2]float64{math.Max(best.tau/4, 2), math.Max(best.theta/4, 2)}, 200)
	if f := p.solve(bound(q)); f.sse < best.sse {
		best = f
	}
	return best
}

// addDisturbance looks in fit's residuals for the largest jump that the
// input does not explain (an unmeasured load starting: the datapoint moves
// while the input held) and for the largest opposite jump after it (the
// load ending), places a step disturbance between them, times its start and
// end on the fine grid, and keeps it when it explains the residuals (an F
// test at about 95 %). It reports whether it added one.
func (p *closedLoop) addDisturbance(fit clFit) bool {
	k1, k2, ok := jumpPair(fit.resid)
	if !ok {
		return false
	}
	prev, next := max(k1-1, 0), min(k2+1, len(p.rows)-1)
	d := StepDisturbance{FromS: p.fine[p.rows[k1].a], ToS: p.fine[len(p.fine)-1] + p.dt}
	if k2 < len(p.rows)-1 {
		d.ToS = p.fine[p.rows[next].a]
	}
	p.dist = append(p.dist, d)
	last := &p.dist[len(p.dist)-1]
	best := p.solve(fit.tau, fit.theta).sse
	try := func(set func(float64), from, to float64) {
		for t := from; t <= to; t += p.dt {
			old := *last
			set(t)
			if s := p.solve(fit.tau, fit.theta).sse; s < best && last.FromS < last.ToS {
				best = s
			} else {
				*last = old
			}
		}
	}
	try(func(t float64) { last.FromS = t }, p.fine[p.rows[prev].a], p.fine[p.rows[k1].b-1])
	if k2 < len(p.rows)-1 {
		try(func(t float64) { last.ToS = t }, p.fine[p.rows[k2].a], p.fine[p.rows[next].b-1])
	}
	dof := float64(len(p.rows) - 3 - len(p.dist))
	if dof <= 0 || (fit.sse-best)/3 <= 4*best/dof {
		p.dist = p.dist[:len(p.dist)-1]
		return false
	}
	return true
}

// jumpPair returns the rows k1..k2 of a step in the residuals r, around
// the largest jump (beyond five robust standard deviations of the jumps and
// a point): the largest opposite jump of at least half its size, after it
// or before it, closes the step; without one the step runs to the end.
func jumpPair(r []float64) (k1, k2 int, ok bool) {
	if len(r) < 3 {
		return 0, 0, false
	}
	d := make([]float64, len(r))
	big := 0
	for i := 1; i < len(r); i++ {
		d[i] = r[i] - r[i-1]
		if math.Abs(d[i]) > math.Abs(d[big]) {
			big = i
		}
	}
	if big == 0 || math.Abs(d[big]) <= math.Max(5*robustSD(d[1:]), 1) {
		return 0, 0, false
	}
	other, size := 0, 0.0
	for j := 1; j < len(r); j++ {
		if j != big && d[j]*d[big] < 0 && math.Abs(d[j]) >= math.Abs(d[big])/2 && math.Abs(d[j]) > size {
			other, size = j, math.Abs(d[j])
		}
	}
	switch {
	case other == 0:
		return big, len(r) - 1, true
	case other > big:
		return big, other - 1, true
	}
	return other, big - 1, true
}

// robustSD is the standard deviation of r estimated from its median
// absolute deviation (1.4826 MAD), blind to a few large values.
func robustSD(r []float64) float64 {
	if len(r) == 0 {
		return 0
	}
	a := slices.Clone(r)
	slices.Sort(a)
	med := a[len(a)/2]
	for i := range a {
		a[i] = math.Abs(r[i] - med)
	}
	slices.Sort(a)
	return 1.4826 * a[len(a)/2]
}

// result turns the final fit into the model with its confidence figures and
// checks that the gain is known well enough to propose gains from it.
func (p *closedLoop) result(fit clFit, res ClosedLoopResult) (ClosedLoopResult, error) {
	n, k := float64(len(p.rows)), float64(len(fit.coef))
	s2 := fit.sse / math.Max(n-k-2, 1)
	m := len(fit.coef)
	res.Model = control.FOPDT{Base: fit.coef[0], Gain: fit.coef[1], Tau: seconds(fit.tau), DeadTime: seconds(fit.theta)}
	res.BaseSE = math.Sqrt(math.Max(0, s2*fit.cov[0]))
	res.GainSE = math.Sqrt(math.Max(0, s2*fit.cov[1*m+1]))
	res.RMSE = math.Sqrt(fit.sse / n)
	res.LagDeadTime = p.lagDeadInterval(fit, s2)
	for k, d := range p.dist {
		d.Size = fit.coef[2+k] // the last coefficient is the initial state's
		res.Disturbances = append(res.Disturbances, d)
	}
	switch {
	case !(res.Model.Gain > 0):
		res.Excitation.OK = false
		res.Excitation.Reason = fmt.Sprintf("the fitted gain is %.3g: the CPU does not rise with the processed rate in this history", res.Model.Gain)
	case implausible(res.Model, res.Excitation.InputRange, p.span) != "":
		res.Excitation.OK = false
		res.Excitation.Reason = implausible(res.Model, res.Excitation.InputRange, p.span)
	case res.GainSE > MaxGainRelSE*res.Model.Gain:
		res.Excitation.OK = false
		res.Excitation.Reason = fmt.Sprintf("the gain %.4g is known only to ±%.0f %% (one standard error; need %.0f %%): the processed rate did not move the CPU clearly above the noise",
			res.Model.Gain, 100*res.GainSE/res.Model.Gain, 100*MaxGainRelSE)
	}
	if !res.Excitation.OK {
		return res, fmt.Errorf("%s: %w", res.Excitation.Reason, ErrNoExcitation)
	}
	return res, nil
}

// implausible says why model m cannot be the plant of a history of span
// seconds whose processed rate spanned inputRange messages/s, or "" when
// it can be: the gain would move the CPU more than its 100 points over
// that span, the base load (the CPU at no input) lies outside -25 to 100 %
// (the base is the fitted line's extrapolation to a rate of zero, and an
// unmeasured load in closed loop moves it: the reference scenario under
// sluggish gains fits -10.2 for a true 10 with the gain within 1 %),
// or the lag plus dead time is more than half the history (a lag that long
// is a drift of the other load that the fit took for the plant).
func implausible(m control.FOPDT, inputRange, span float64) string {
	lag := m.Tau + m.DeadTime
	switch {
	case m.Gain*inputRange > 100:
		return fmt.Sprintf("implausible model: a gain of %.3g points per msg/s would move the CPU %.0f points over the processed rate's span of %.3g msg/s (the CPU has 100)",
			m.Gain, m.Gain*inputRange, inputRange)
	case m.Base < -25 || m.Base > 100:
		return fmt.Sprintf("implausible model: a base load of %.3g %% (the CPU at no processed rate) is outside -25 to 100 %%", m.Base)
	case lag.Seconds() > span/2:
		return fmt.Sprintf("implausible model: a lag + dead time of %v is more than half the history (%v): the fit took a slow drift of the other load for the plant",
			lag, seconds(span))
	}
	return ""
}

// lagDeadInterval is the range of lag + dead time whose best cost stays
// within the 95 % profile-likelihood bound of the fit (cost rise below
// 3.84 s2), scanned in one-second steps along the dead time with the lag at
// its fit (along the lag once the dead time is zero), until the cost leaves
// the bound on each side.
func (p *closedLoop) lagDeadInterval(fit clFit, s2 float64) [2]time.Duration {
	total := fit.tau + fit.theta
	limit := fit.sse + 3.84*math.Max(s2, 1e-12)
	within := func(t float64) bool {
		if t < 0 {
			return false
		}
		if theta := t - fit.tau; theta >= 0 {
			return p.solve(fit.tau, theta).sse <= limit
		}
		return p.solve(t, 0).sse <= limit
	}
	lo, hi := total, total
	for d := 1.0; d <= 900 && within(total+d); d++ {
		hi = total + d
	}
	for d := 1.0; d <= total && within(total-d); d++ {
		lo = total - d
	}
	return [2]time.Duration{seconds(lo), seconds(hi)}
}
