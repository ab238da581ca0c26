package main

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
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
