package control

import (
	"math"
	"testing"
	"time"
)

func TestStalePolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        StalePolicy
		last     float64
		staleFor time.Duration
		want     float64
	}{
		{"hold", StalePolicy{Action: StaleHold, SafeRate: 100}, 800, time.Hour, 800},
		{"within grace", StalePolicy{Action: StaleFailClosed, SafeRate: 100, Grace: 5 * time.Minute}, 800, 4 * time.Minute, 800},
		{"fail closed", StalePolicy{Action: StaleFailClosed, SafeRate: 100}, 800, time.Minute, 100},
		{"fail closed never raises", StalePolicy{Action: StaleFailClosed, SafeRate: 100}, 50, time.Minute, 50},
		{"decay one time constant", StalePolicy{Action: StaleDecay, SafeRate: 100, DecayTime: time.Minute}, 800, time.Minute, 100 + 700*math.Exp(-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.p.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tc.p.Apply(tc.last, tc.staleFor, time.Minute); math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("Apply(%v, %v) = %v; want %v", tc.last, tc.staleFor, got, tc.want)
			}
		})
	}
	for _, bad := range []StalePolicy{{Action: "x"}, {Action: StaleDecay, SafeRate: 1}, {Action: StaleHold, SafeRate: -1}, {Action: StaleHold, Grace: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v: valid; want an error", bad)
		}
	}
}
