package main

import (
	"testing"
	"time"
)

// The seconds above a limit count on the mean over the metric's period: a
// lumpy 1-s record that averages below the limit counts none, a sustained
// rise counts the seconds its mean is above.
func TestSecondsAboveCountsThePeriodsMean(t *testing.T) {
	r := &run{}
	r.Cfg.Tick = 4 * time.Second
	for s := range 40 {
		cpu := 20.0 // lumps: 20, 40, 20, 40, ... averages 30
		if s%2 == 1 {
			cpu = 40
		}
		if s >= 20 && s < 30 {
			cpu = 60 // ten seconds of a burst
		}
		r.cpu = append(r.cpu, cpuPoint{t: time.Duration(s) * time.Second, cpu: cpu})
	}
	if n, _ := r.secondsAbove(0, 20*time.Second, 35); n != 0 {
		t.Errorf("lumps that average 30: %d s above 35; want 0", n)
	}
	n, peak := r.secondsAbove(20*time.Second, 40*time.Second, 35)
	// the 4-s mean is above 35 from 2 s into the burst to 1 s after it
	if n < 9 || n > 12 || peak != 60 {
		t.Errorf("a 10-s burst at 60: %d s above 35, peak %v; want about 10 s, peak 60", n, peak)
	}
}
