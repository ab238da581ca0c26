package main

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// A phase's figures leave out stale ticks and unknown values.
func TestSummarizeLeavesOutStaleAndUnknown(t *testing.T) {
	t0 := time.Unix(0, 0)
	pts := []history.Point{
		{T: t0, Setpoint: 30, Measured: 20, Consumed: 10},
		{T: t0.Add(5 * time.Second), Setpoint: 30, Measured: 30, Consumed: math.NaN()},
		{T: t0.Add(10 * time.Second), Setpoint: 30, Measured: 99, Stale: true, Consumed: 20},
		{T: t0.Add(15 * time.Second), Setpoint: 30, Measured: math.NaN(), Consumed: 30},
	}
	got := summarize("p", pts)
	want := phase{Name: "p", Setpoint: 30, MeanCPU: 25, SDCPU: 5, MeanConsumed: 20, Ticks: 4}
	if got != want {
		t.Fatalf("summarize = %+v, want %+v", got, want)
	}
}

// unsmooth recovers the per-tick processed rate from the controller's
// exponential average of it, and keeps the point where the average
// restarted after an unknown one.
func TestUnsmoothInvertsTheProcessedRateAverage(t *testing.T) {
	t0 := time.Unix(0, 0)
	raw := []float64{4, 4, 0, 0, 10, 12, math.NaN(), 7, 7}
	var pts []history.Point
	var avg float64
	for i, x := range raw {
		dt := 5 * time.Second
		if i == 5 {
			dt = 7 * time.Second // a late tick
		}
		switch {
		case i == 0 || math.IsNaN(raw[i-1]) || math.IsNaN(x):
			avg = x
		default:
			a := math.Exp(-dt.Seconds() / loop.ProcessedSmoothing.Seconds())
			avg = a*avg + (1-a)*x
		}
		t0 = t0.Add(dt)
		pts = append(pts, history.Point{T: t0, Consumed: avg})
	}
	got := unsmooth(pts)
	for i, x := range raw {
		if c := got[i].Consumed; math.IsNaN(x) != math.IsNaN(c) || !math.IsNaN(x) && math.Abs(c-x) > 1e-9 {
			t.Errorf("point %d: consumed %v, want %v (smoothed %v)", i, c, x, pts[i].Consumed)
		}
	}
}
