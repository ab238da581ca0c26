package drift

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// deadWindow is a window of 16 one-minute datapoints of a plant with dead
// time dead answering a rate step from 1,200 to 800 msg/s at 8 min, with a
// load of load points from 4 min and a noise of about 0.6 points; h is the
// model's response to the rate history.
func deadWindow(m Model, dead time.Duration, load float64) ([]Sample, Response) {
	h := response(m, []control.Segment{{At: -time.Hour, Value: 1200}, {At: 8 * time.Minute, Value: 800}})
	var s []Sample
	for i := range 16 {
		s = append(s, Sample{End: time.Duration(i+1) * time.Minute})
	}
	truth := predictWindow(s, h, m, dead, time.Minute)
	for i := range s {
		s[i].Y = m.Base + truth[i] + 0.8*math.Sin(float64(7*i))
		if s[i].End > 4*time.Minute {
			s[i].Y += load
		}
	}
	return s, h
}

func TestDeadTimeTest(t *testing.T) {
	m := Model{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	shift := 10 * time.Second
	s, h := deadWindow(m, 20*time.Second, 0)
	ev, dead, ok := deadTimeTest(s, h, m, time.Minute, shift, 1)
	t.Logf("dead time 5s to 20s: evidence %.1f, estimate %v", ev, dead)
	if !ok || ev <= DeadTimeEvidence || dead < 15*time.Second || dead > 25*time.Second {
		t.Errorf("dead time 5s to 20s: evidence %.1f, dead time %v, %v; want above %v, about 20s", ev, dead, ok, DeadTimeEvidence)
	}
	// The model's dead time, and a load of 20 points that starts before
	// the step: nothing beyond the shift fits better by the threshold.
	s, h = deadWindow(m, 5*time.Second, 20)
	if ev, dead, _ := deadTimeTest(s, h, m, time.Minute, shift, 1); ev > DeadTimeEvidence {
		t.Errorf("right dead time with a load: evidence %.1f for %v; want at most %v", ev, dead, DeadTimeEvidence)
	}
	// At a steady rate the window says nothing of the delay.
	h = response(m, []control.Segment{{At: -time.Hour, Value: 1200}})
	if ev, dead, _ := deadTimeTest(s, h, m, time.Minute, shift, 1); ev > 1 {
		t.Errorf("steady rate: evidence %.1f for %v; want none", ev, dead)
	}
}
