package drift

import "math"

// The change test: a plant whose gain moves at some instant makes the
// residual follow the prediction from then on (r = a + b z + g z after it),
// where a load that starts makes it step by a constant (r = a + b z + c after
// it). At a steady rate the two cannot be told apart; they part as soon as
// the prediction moves after the change, which the controller's own answer
// to it provides, and on the datapoints at the ceiling: a load that would
// leave the signal below the ceiling is refuted by a pinned datapoint. So
// the detector fits both over the window, for every instant of the change, the
// datapoints at the ceiling as lower bounds, and says the gain moved when
// the best change of gain explains the residual better than the best load
// (or no change at all) by ChangeEvidence times the residual's
// variance, and the gain moved by more than GainError.
const (
	// ChangeEvidence is how much lower (in residual variances) the
	// sum of squares of a change of gain must be than that of a load.
	// (A χ²-like figure: on the reference scenario with noise 1 point it
	// stayed below 3 over whole runs without a change, seeds 1 to 4.)
	ChangeEvidence = 10.0
	// ChangeWindow is the number of datapoints the change test spans,
	// those at the ceiling included: the change must still be in it when
	// the controller's answer has moved the prediction.
	ChangeWindow = 16
	// changeAfter is the least number of datapoints, not at the
	// ceiling, after the instant of a change of gain.
	changeAfter = 1
)

// changeTest tests the window for a change of the plant's gain. It returns
// the evidence (sum of squares of the best load, or of no change, less that
// of the best change of gain, over the residual's variance) and the change's
// relative gain error; ok is false when the window is too short.
func changeTest(s []Sample, base, noise float64) (evidence, gainErr float64, ok bool) {
	n := len(s)
	r, z, cut := make([]float64, n), make([]float64, n), make([]bool, n)
	uncut := 0
	for i, x := range s {
		r[i], z[i], cut[i] = x.Y-base-x.Z, x.Z, x.Cut
		if !x.Cut {
			uncut++
		}
	}
	if uncut < 5 {
		return 0, 0, false
	}
	bestLoad, bestGain, gain, ok := changeFits(r, z, cut)
	if !ok {
		return 0, 0, false
	}
	v := math.Max(math.Min(bestGain, bestLoad)/float64(uncut-2), noise)
	return (bestLoad - bestGain) / v, gain, true
}

// changeFits fits the residual r of the prediction z (the cut rows as lower
// bounds) as a level plus a load that starts at some instant (or none), and
// as a level plus a change of gain at some instant (r = a + g z after it).
// It returns both least sums of squares and the best change's g; ok is
// false when no change of gain could be fitted.
func changeFits(r, z []float64, cut []bool) (bestLoad, bestGain, gain float64, ok bool) {
	n := len(r)
	one := make([]float64, n)
	for i := range one {
		one[i] = 1
	}
	if _, bestLoad, ok = fitCut([][]float64{one}, r, cut); !ok {
		return 0, 0, 0, false
	}
	bestGain = math.Inf(1)
	for j := 1; j < n; j++ {
		if count(cut[j:], false) < changeAfter || count(cut[:j], false) < 1 {
			continue
		}
		step, scaled := make([]float64, n), make([]float64, n)
		for i := j; i < n; i++ {
			step[i], scaled[i] = 1, z[i]
		}
		if _, sse, ok := fitCut([][]float64{one, step}, r, cut); ok && sse < bestLoad {
			bestLoad = sse
		}
		if c, sse, ok := fitCut([][]float64{one, scaled}, r, cut); ok && sse < bestGain {
			bestGain, gain = sse, c[1]
		}
	}
	return bestLoad, bestGain, gain, !math.IsInf(bestGain, 1)
}

// count is the number of elements of v equal to want.
func count(v []bool, want bool) int {
	k := 0
	for _, x := range v {
		if x == want {
			k++
		}
	}
	return k
}

// fitCut fits y on the columns by least squares, the rows where cut is set
// being lower bounds: such a row counts only where the fit falls below it
// (an active set, refitted until it settles). It returns the coefficients
// and the sum of squares; ok is false when the columns are degenerate.
func fitCut(cols [][]float64, y []float64, cut []bool) (coef []float64, sse float64, ok bool) {
	use := make([]bool, len(y))
	for i := range y {
		use[i] = !cut[i]
	}
	for range 5 {
		if coef, ok = lsq(cols, y, use); !ok {
			return nil, 0, false
		}
		changed := false
		for i := range y {
			if cut[i] && !use[i] && dot(cols, coef, i) < y[i] {
				use[i], changed = true, true
			}
		}
		if !changed {
			break
		}
	}
	for i := range y {
		if use[i] {
			e := y[i] - dot(cols, coef, i)
			sse += e * e
		}
	}
	return coef, sse, true
}

// dot is row i of the columns times coef.
func dot(cols [][]float64, coef []float64, i int) float64 {
	v := 0.0
	for k, c := range cols {
		v += c[i] * coef[k]
	}
	return v
}

// lsq solves the least-squares problem of up to three columns over the
// rows in use.
func lsq(cols [][]float64, y []float64, use []bool) ([]float64, bool) {
	n := len(cols)
	var m [3][3]float64
	var b [3]float64
	for i := range y {
		if !use[i] {
			continue
		}
		for j := range n {
			for k := range n {
				m[j][k] += cols[j][i] * cols[k][i]
			}
			b[j] += cols[j][i] * y[i]
		}
	}
	inv, ok := invert(m, n)
	if !ok {
		return nil, false
	}
	coef := make([]float64, n)
	for j := range n {
		for k := range n {
			coef[j] += inv[j][k] * b[k]
		}
	}
	return coef, true
}
