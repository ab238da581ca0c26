package drift

import (
	"math"
	"testing"
	"time"
)

// window is a window of datapoints around a change at index 8: the
// prediction z, and the signal y(i, z) (pinned at 100 and the next one cut,
// as trackDrift records them with a noise band of 3).
func window(zs []float64, y func(i int, z float64) float64) []Sample {
	var s []Sample
	pinned := false
	for i, z := range zs {
		v := y(i, z) + 0.8*math.Sin(float64(7*i)) // noise of about 0.6 points
		x := Sample{End: time.Duration(i) * time.Minute, Y: v, Z: z}
		switch {
		case v >= ceiling-3:
			x.Y, x.Cut, pinned = ceiling-6, true, true
		case pinned:
			x.Y, x.Cut, pinned = v-3, true, false
		}
		s = append(s, x)
	}
	return s
}

// The controller's answer to a doubled gain (the rate cut to half, the
// signal at the ceiling meanwhile) tells it from a load that moved the
// signal as much at the rate in force: the change test says the gain moved
// by about +100 % for the first, and not for the second.
func TestChangeTest(t *testing.T) {
	const base = 10.0
	zs := []float64{60, 60, 60, 60, 60, 60, 60, 60, 60, 58, 45, 36, 32, 30, 31, 29}
	gain := window(zs, func(i int, z float64) float64 {
		if i >= 8 {
			return min(100, base+2*z)
		}
		return base + z
	})
	ev, g, ok := changeTest(gain, base, 1)
	t.Logf("gain doubled: evidence %.1f, gain error %.2f", ev, g)
	if !ok || ev < ChangeEvidence || math.Abs(g-1) > 0.15 {
		t.Errorf("gain doubled: evidence %.1f, gain error %.2f (ok %v); want above %v and about +1", ev, g, ok, ChangeEvidence)
	}
	load := window(zs, func(i int, z float64) float64 {
		if i >= 8 {
			return min(100, base+z+35)
		}
		return base + z
	})
	ev, g, ok = changeTest(load, base, 1)
	t.Logf("load: evidence %.1f, gain error %.2f", ev, g)
	if !ok || ev > 0 {
		t.Errorf("load of 35 points: evidence %.1f, gain error %.2f (ok %v); want at most 0", ev, g, ok)
	}
	steady := window(zs[:9], func(_ int, z float64) float64 { return base + z })
	if ev, _, ok := changeTest(steady, base, 1); ok && ev > 1 {
		t.Errorf("no change: evidence %.1f; want none", ev)
	}
}
