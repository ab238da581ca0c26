package lab

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// eventsByKind indexes a result's events by their kind (the first of each).
func eventsByKind(r Result) map[string]sim.EventIAE {
	m := map[string]sim.EventIAE{}
	for _, e := range r.Events {
		if _, ok := m[e.Kind]; !ok {
			m[e.Kind] = e
		}
	}
	return m
}

// swing is the largest |CPU - setpoint| over [from, to) of ser, points: a
// cascade that rings keeps it large long after the disturbance's onset.
func swing(ser sim.Series, from, to time.Duration) float64 {
	out := 0.0
	for i, t := range ser.T {
		if t > from.Seconds() && t <= to.Seconds() {
			out = math.Max(out, math.Abs(ser.CPU[i]-ser.Setpoint[i]))
		}
	}
	return out
}

// checkCascade asserts the cascade's acceptance against pi-aw-spf-ff in the
// same run of scenario s: seconds above setpoint + 5 after the
// disturbance's onset at most 15, its IAE at most half, the disturbance's
// end at most 10 % above, the processed messages at least 0.98, the start
// and the setpoint edit no worse (slack: the part of them the noise makes
// differ), nothing lost, and no ringing in the disturbance's second half.
func checkCascade(t *testing.T, s sim.Scenario, slack float64) {
	t.Helper()
	rep, err := Compare(s, Options{Controllers: []string{PIAWSPFF, Cascade}})
	if err != nil {
		t.Fatal(err)
	}
	r := byName(t, rep)
	base, c := r[PIAWSPFF], r[Cascade]
	be, ce := eventsByKind(base), eventsByKind(c)
	t.Logf("violation_s %v (%v), disturbance %.0f s above, IAE %.0f (%.0f), end %.0f (%.0f), setpoint %.3f (%.3f), processed %d (%d)",
		c.ViolationS, base.ViolationS, ce["disturbance"].ViolationS, ce["disturbance"].IAE, be["disturbance"].IAE,
		ce["disturbance-end"].IAE, be["disturbance-end"].IAE, ce["setpoint"].IAE, be["setpoint"].IAE, c.Processed, base.Processed)
	if v := ce["disturbance"].ViolationS; v > 15 {
		t.Errorf("%.0f s above setpoint + 5 after the disturbance's onset; want <= 15 (pi-aw-spf-ff %.0f)", v, be["disturbance"].ViolationS)
	}
	if got, want := ce["disturbance"].IAE, be["disturbance"].IAE/2; got > want {
		t.Errorf("disturbance IAE %.0f; want <= half of pi-aw-spf-ff's, %.0f", got, want)
	}
	if got, want := ce["disturbance-end"].IAE, 1.1*be["disturbance-end"].IAE; got > want {
		t.Errorf("disturbance-end IAE %.0f; want <= 1.1 x pi-aw-spf-ff's, %.0f", got, want)
	}
	if float64(c.Processed) < 0.98*float64(base.Processed) || c.Lost != 0 {
		t.Errorf("processed %d, lost %d; want >= 0.98 x %d and none lost", c.Processed, c.Lost, base.Processed)
	}
	for _, k := range []string{"start", "setpoint"} {
		if ce[k].IAE > (1+slack)*be[k].IAE {
			t.Errorf("%s IAE %.0f; want no worse than pi-aw-spf-ff's %.0f", k, ce[k].IAE, be[k].IAE)
		}
	}
	if c.StartOvershootPP > base.StartOvershootPP+1e-9 || c.ViolationS-ce["disturbance"].ViolationS > base.ViolationS-be["disturbance"].ViolationS+1 {
		t.Errorf("overshoot %.2f, violation outside the disturbance %.0f s; want no worse than pi-aw-spf-ff (%.2f, %.0f s)",
			c.StartOvershootPP, c.ViolationS-ce["disturbance"].ViolationS, base.StartOvershootPP, base.ViolationS-be["disturbance"].ViolationS)
	}
	d := s.Disturbances[0]
	if sw := swing(c.Series, d.At+d.Duration/2, d.At+d.Duration); sw > sim.SettlingBand+3*s.Noise {
		t.Errorf("CPU swings %.1f points around the setpoint in the disturbance's second half; want <= %.1f (no sustained oscillation)",
			sw, sim.SettlingBand+3*s.Noise)
	}
}

func TestCascadeReference(t *testing.T) { checkCascade(t, sim.Reference(), 1e-3) }

// TestCascadeOtherPlants runs the cascade on plants other than the
// reference, with measurement noise 1: one more sensitive (gain 0.08,
// base 15 %), one less (gain 0.04, base 25 %, another noise seed).
func TestCascadeOtherPlants(t *testing.T) {
	sensitive := sim.Reference()
	sensitive.Noise, sensitive.Plant.Gain, sensitive.Plant.Base = 1, 0.08, 15
	loaded := sim.Reference()
	loaded.Noise, loaded.Plant.Gain, loaded.Plant.Base, loaded.Seed = 1, 0.04, 25, 7
	for name, s := range map[string]sim.Scenario{"sensitive": sensitive, "loaded": loaded} {
		t.Run(name, func(t *testing.T) { checkCascade(t, s, 0.01) })
	}
}

// TestCascadeLatencyThatDoesNotRespond: on a destination whose latency does
// not respond to load the inner loop stays out of the way: the cascade's
// figures are pi-aw-spf-ff's within 2 %.
func TestCascadeLatencyThatDoesNotRespond(t *testing.T) {
	s := sim.Reference()
	s.Latency.Mode = sim.LatencyFlat
	rep, err := Compare(s, Options{Controllers: []string{PIAWSPFF, Cascade}})
	if err != nil {
		t.Fatal(err)
	}
	r := byName(t, rep)
	base, c := r[PIAWSPFF], r[Cascade]
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.02*math.Max(math.Abs(b), 1) }
	if !near(c.IAE, base.IAE) || !near(c.ViolationS, base.ViolationS) || !near(float64(c.Processed), float64(base.Processed)) {
		t.Errorf("cascade IAE %.0f, violation %.0f s, processed %d; want pi-aw-spf-ff's within 2 %%: %.0f, %.0f s, %d",
			c.IAE, c.ViolationS, c.Processed, base.IAE, base.ViolationS, base.Processed)
	}
	for i, e := range c.Events {
		if !near(e.IAE, base.Events[i].IAE) {
			t.Errorf("event %s IAE %.0f; want pi-aw-spf-ff's %.0f within 2 %%", e.Kind, e.IAE, base.Events[i].IAE)
		}
	}
}
