package ident

import (
	"testing"
	"time"
)

// BenchmarkFit measures a fit of a 10-minute test sampled every second (the
// default of `sluice lab step`) and of a day sampled every second.
func BenchmarkFit(b *testing.B) {
	for _, c := range []struct {
		name string
		end  time.Duration
	}{{"10m", 10 * time.Minute}, {"24h", 24 * time.Hour}} {
		d := stepTest(reference, 600, 1200, 2*time.Minute, time.Second, c.end, 1, 1)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Fit(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
