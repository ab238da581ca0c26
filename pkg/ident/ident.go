package ident

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// MinSamples is the fewest samples a step test may have.
const MinSamples = 10

// Errors that say what is wrong with a step test. They are wrapped with the
// details (sample index, value); test for them with errors.Is.
var (
	ErrTooFewSamples = errors.New("too few samples")
	ErrNotFinite     = errors.New("value is NaN or infinite")
	ErrTimeOrder     = errors.New("time is not strictly increasing")
	ErrNoStep        = errors.New("no step in the input")
	ErrNoResponse    = errors.New("the output does not respond to the step")
)

// Data is an open-loop step test: at time T[i] (seconds) the input was U[i]
// (messages/s) and the measured output was Y[i] (percent CPU). The input is
// held from one sample to the next (zero-order hold): U[i] applies on
// [T[i], T[i+1]). The plant is assumed to be at steady state at U[0] before
// T[0].
type Data struct {
	T []float64 `json:"t_s"`
	U []float64 `json:"input"`
	Y []float64 `json:"output"`
}

// Len returns the number of samples.
func (d Data) Len() int { return len(d.T) }

// Validate reports whether d is a usable step test: equal lengths, at least
// MinSamples samples, finite values, strictly increasing time, and a step in
// the input with samples on both sides of it.
func (d Data) Validate() error {
	_, err := d.step()
	return err
}

// step validates d and returns the index of the first sample after the
// largest change of the input.
func (d Data) step() (int, error) {
	n := len(d.T)
	if len(d.U) != n || len(d.Y) != n {
		return 0, fmt.Errorf("step test has %d times, %d inputs and %d outputs: lengths differ", n, len(d.U), len(d.Y))
	}
	if n < MinSamples {
		return 0, fmt.Errorf("step test has %d samples, need at least %d: %w", n, MinSamples, ErrTooFewSamples)
	}
	umax := 0.0
	for i := range n {
		for _, c := range []struct {
			name string
			v    float64
		}{{"time", d.T[i]}, {"input", d.U[i]}, {"output", d.Y[i]}} {
			if math.IsNaN(c.v) || math.IsInf(c.v, 0) {
				return 0, fmt.Errorf("sample %d: %s is %v: %w", i, c.name, c.v, ErrNotFinite)
			}
		}
		if i > 0 && !(d.T[i] > d.T[i-1]) {
			return 0, fmt.Errorf("sample %d: time %v s after %v s: %w", i, d.T[i], d.T[i-1], ErrTimeOrder)
		}
		umax = math.Max(umax, math.Abs(d.U[i]))
	}
	// The step is the largest change of the input, so that a recorded
	// (slightly jittery) rate works as well as a commanded one.
	tol := 1e-9 * math.Max(1, umax)
	s, big := 0, tol
	for i := 1; i < n; i++ {
		if c := math.Abs(d.U[i] - d.U[i-1]); c > big {
			s, big = i, c
		}
	}
	if s == 0 {
		return 0, fmt.Errorf("input is %v throughout: %w", d.U[0], ErrNoStep)
	}
	if n-s < MinSamples/2 {
		return 0, fmt.Errorf("the input steps at sample %d of %d: need at least %d samples after the step: %w", s, n, MinSamples/2, ErrTooFewSamples)
	}
	return s, nil
}

// Simulate returns the output of model m at times t for the input u (held
// from one sample to the next), starting from steady state at u[0]. The
// response is exact for a piecewise-constant input: the lag is integrated in
// closed form and the dead time is continuous, not rounded to samples.
func Simulate(m control.FOPDT, t, u []float64) []float64 {
	x := respond(m.Tau.Seconds(), m.DeadTime.Seconds(), t, u, nil)
	for i := range x {
		x[i] = m.Base + m.Gain*x[i]
	}
	return x
}

// respond returns the unit-gain, zero-base response x of a lag tau with dead
// time theta (both seconds) to input u at times t, written into out if it is
// long enough.
func respond(tau, theta float64, t, u, out []float64) []float64 {
	n := len(t)
	if cap(out) < n {
		out = make([]float64, n)
	}
	out = out[:n]
	if n == 0 {
		return out
	}
	x := u[0]
	cur := u[0] // delayed input acting now
	s := t[0]   // time at which x is known
	k := 1      // next input change, acting at t[k]+theta
	advance := func(to float64) {
		if to <= s {
			return
		}
		if tau <= 0 {
			x = cur
		} else {
			x = cur + (x-cur)*math.Exp(-(to-s)/tau)
		}
		s = to
	}
	for i := range n {
		for k < n && t[k]+theta <= t[i] {
			advance(t[k] + theta)
			cur = u[k]
			k++
		}
		advance(t[i])
		out[i] = x
	}
	return out
}

// Result is an identified model and how well it fits the step test.
type Result struct {
	// Model is the least-squares fit.
	Model control.FOPDT
	// Guess is the two-point estimate the search started from.
	Guess control.FOPDT
	// RMSE is the root-mean-square error of the fit, in output units.
	RMSE float64
}

// TwoPoint estimates a FOPDT model from the first step in d by Smith's
// two-point method: tau = 1.5 (t63 - t28), theta = t63 - tau, with the output
// lightly smoothed against measurement noise. The final value is the mean of
// the last fifth of the samples before the input changes again. The step is
// the largest change of the input; the levels before and after it are the
// input's means over the samples until it moves by half the step again.
func TwoPoint(d Data) (control.FOPDT, error) {
	s, err := d.step()
	if err != nil {
		return control.FOPDT{}, err
	}
	n := d.Len()
	// The segments before and after the step end where the input moves by
	// more than half the step again.
	du := d.U[s] - d.U[s-1]
	b, e := 0, n
	for i := s - 1; i > 0; i-- {
		if math.Abs(d.U[i]-d.U[i-1]) > math.Abs(du)/2 {
			b = i
			break
		}
	}
	for i := s + 1; i < n; i++ {
		if math.Abs(d.U[i]-d.U[s]) > math.Abs(du)/2 {
			e = i
			break
		}
	}
	u0, u1 := mean(d.U[b:s]), mean(d.U[s:e])
	du = u1 - u0
	y0 := mean(d.Y[b:s])
	tail := max(1, (e-s)/5)
	yinf := mean(d.Y[e-tail : e])
	dy := yinf - y0
	noise := math.Max(stddev(d.Y[b:s]), stddev(d.Y[e-tail:e]))
	if math.Abs(dy) <= 1e-12*math.Max(1, math.Abs(y0)) || math.Abs(dy) < 2*noise {
		return control.FOPDT{}, fmt.Errorf("output moved %.3g (noise %.3g) for an input step of %.3g: %w", dy, noise, du, ErrNoResponse)
	}
	gain := dy / du
	ys := smooth(d.Y[s:e], 2)
	cross := func(frac float64) float64 {
		prev := 0.0
		for i, v := range ys {
			f := (v - y0) / dy
			if f >= frac {
				if i == 0 {
					return 0
				}
				// Linear interpolation between samples i-1 and i.
				t0, t1 := d.T[s+i-1]-d.T[s], d.T[s+i]-d.T[s]
				return t0 + (t1-t0)*(frac-prev)/(f-prev)
			}
			prev = f
		}
		return d.T[e-1] - d.T[s]
	}
	t28, t63 := cross(0.283), cross(0.632)
	tau := 1.5 * (t63 - t28)
	theta := math.Max(0, t63-tau)
	return control.FOPDT{
		Gain:     gain,
		Tau:      seconds(tau),
		DeadTime: seconds(theta),
		Base:     y0 - gain*u0,
	}, nil
}

// Fit identifies a FOPDT model from the step test d by least squares,
// starting from the two-point estimate. It returns an error wrapping one of
// the package's sentinel errors when d is unusable, and ErrNoResponse when
// the fitted gain is not positive (the plant's output must rise with its
// input).
func Fit(d Data) (Result, error) {
	s, err := d.step()
	if err != nil {
		return Result{}, err
	}
	guess, err := TwoPoint(d)
	if err != nil {
		return Result{}, err
	}
	f := fitter{d: d, span: d.T[d.Len()-1] - d.T[s], buf: make([]float64, d.Len())}
	starts := append(f.gridStarts(), candidate{tau: guess.Tau.Seconds(), theta: guess.DeadTime.Seconds()})
	tau, theta := f.search(starts)
	sse, base, gain := f.cost(tau, theta)
	if !(gain > 0) {
		return Result{}, fmt.Errorf("fitted gain %.3g: %w", gain, ErrNoResponse)
	}
	return Result{
		Model: control.FOPDT{
			Gain:     gain,
			Tau:      seconds(tau),
			DeadTime: seconds(theta),
			Base:     base,
		},
		Guess: guess,
		RMSE:  math.Sqrt(sse / float64(d.Len())),
	}, nil
}

// fitter is the least-squares fit of a FOPDT to a step test: for a given
// time constant and dead time the base and gain are linear, so the search
// runs over (tau, theta) only.
type fitter struct {
	d    Data
	span float64 // seconds from the step to the end of the test
	buf  []float64
}

// candidate is a point of the search with its cost.
type candidate struct{ c, tau, theta float64 }

// cost returns the sum of squared residuals of the best base and gain for tau
// and theta (negative values count as zero).
func (f *fitter) cost(tau, theta float64) (sse, base, gain float64) {
	tau = math.Max(0, tau)
	theta = math.Max(0, theta)
	x := respond(tau, theta, f.d.T, f.d.U, f.buf)
	base, gain = linfit(x, f.d.Y)
	for i, v := range x {
		r := f.d.Y[i] - (base + gain*v)
		sse += r * r
	}
	return sse, base, gain
}

// gridStarts evaluates a coarse grid over the feasible region and returns
// its best few points.
func (f *fitter) gridStarts() []candidate {
	const nTheta, nTau, nStarts = 40, 30, 4
	var starts []candidate
	consider := func(tau, theta float64) {
		c, _, _ := f.cost(tau, theta)
		starts = append(starts, candidate{c, tau, theta})
		for k := len(starts) - 1; k > 0 && starts[k].c < starts[k-1].c; k-- {
			starts[k], starts[k-1] = starts[k-1], starts[k]
		}
		if len(starts) > nStarts {
			starts = starts[:nStarts]
		}
	}
	for i := range nTheta {
		// Denser near zero: dead times are usually short against the test.
		fr := float64(i) / nTheta
		theta := f.span * fr * fr
		for j := range nTau + 1 {
			tau := 0.0
			if j > 0 {
				tau = f.span * 1e-3 * math.Pow(2e3, float64(j-1)/float64(nTau-1))
			}
			consider(tau, theta)
		}
	}
	return starts
}

// search runs a simplex from each start (restarted once where it stopped,
// against early collapse) and returns the best (tau, theta). The objective is
// mirrored at zero so that the simplex may cross the bounds.
func (f *fitter) search(starts []candidate) (tau, theta float64) {
	span := f.span
	obj := func(p [2]float64) float64 {
		c, _, _ := f.cost(math.Abs(p[0]), math.Abs(p[1]))
		return c
	}
	best, p := math.Inf(1), [2]float64{}
	for _, st := range starts {
		q := nelderMead(obj, [2]float64{st.tau, st.theta}, [2]float64{math.Max(st.tau/4, 1e-3*span), math.Max(st.theta/4, 1e-3*span)}, 300)
		q = nelderMead(obj, q, [2]float64{math.Max(math.Abs(q[0])/10, 1e-4*span), math.Max(math.Abs(q[1])/10, 1e-4*span)}, 300)
		if c := obj(q); c < best {
			best, p = c, q
		}
	}
	return math.Max(0, math.Abs(p[0])), math.Max(0, math.Abs(p[1]))
}

// linfit returns a and b minimising sum (y - a - b x)^2.
func linfit(x, y []float64) (a, b float64) {
	mx, my := mean(x), mean(y)
	var sxx, sxy float64
	for i := range x {
		dx := x[i] - mx
		sxx += dx * dx
		sxy += dx * (y[i] - my)
	}
	if sxx <= 1e-300 {
		return my, 0
	}
	b = sxy / sxx
	return my - b*mx, b
}

// nelderMead minimises f from x0 with initial steps step, for at most iter
// iterations (Nelder & Mead 1965, standard coefficients).
func nelderMead(f func([2]float64) float64, x0, step [2]float64, iter int) [2]float64 {
	type vertex struct {
		p [2]float64
		v float64
	}
	mk := func(p [2]float64) vertex { return vertex{p, f(p)} }
	s := [3]vertex{mk(x0), mk([2]float64{x0[0] + step[0], x0[1]}), mk([2]float64{x0[0], x0[1] + step[1]})}
	lerp := func(a, b [2]float64, t float64) [2]float64 {
		return [2]float64{a[0] + t*(b[0]-a[0]), a[1] + t*(b[1]-a[1])}
	}
	for range iter {
		// Sort best to worst.
		for i := 1; i < 3; i++ {
			for j := i; j > 0 && s[j].v < s[j-1].v; j-- {
				s[j], s[j-1] = s[j-1], s[j]
			}
		}
		size := math.Abs(s[2].p[0]-s[0].p[0]) + math.Abs(s[2].p[1]-s[0].p[1]) + math.Abs(s[1].p[0]-s[0].p[0]) + math.Abs(s[1].p[1]-s[0].p[1])
		if size < 1e-6*(1+math.Abs(s[0].p[0])+math.Abs(s[0].p[1])) {
			break
		}
		c := lerp(s[0].p, s[1].p, 0.5) // centroid of the best two
		r := mk(lerp(c, s[2].p, -1))
		switch {
		case r.v < s[0].v:
			if e := mk(lerp(c, s[2].p, -2)); e.v < r.v {
				s[2] = e
			} else {
				s[2] = r
			}
		case r.v < s[1].v:
			s[2] = r
		default:
			if k := mk(lerp(c, s[2].p, 0.5)); k.v < s[2].v {
				s[2] = k
			} else {
				s[1] = mk(lerp(s[0].p, s[1].p, 0.5))
				s[2] = mk(lerp(s[0].p, s[2].p, 0.5))
			}
		}
	}
	best := s[0]
	for _, v := range s[1:] {
		if v.v < best.v {
			best = v
		}
	}
	return best.p
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func stddev(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := mean(v)
	s := 0.0
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(v)-1))
}

// smooth returns the centred moving average of v with half-width h.
func smooth(v []float64, h int) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		lo, hi := max(0, i-h), min(len(v), i+h+1)
		out[i] = mean(v[lo:hi])
	}
	return out
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}
