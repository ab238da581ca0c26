package sim

import (
	"math"
	"testing"
	"time"
)

func TestReplicaLagGrowsWhileTheRateExceedsCapacity(t *testing.T) {
	r := NewReplicaLag(1000)
	var lag float64
	for range 60 {
		lag = r.Step(1200, 1)
	}
	// 200 messages/s too many for 60 s: 12,000 messages behind, 12 s at
	// 1,000 messages/s.
	if math.Abs(lag-12) > 1e-9 || math.Abs(r.Backlog()-12000) > 1e-9 {
		t.Fatalf("after 60 s at 1200 msg/s: lag %v s, backlog %v; want 12 s, 12000", lag, r.Backlog())
	}
	// Twice the excess, twice the slope: an integrating process.
	before := lag
	for range 60 {
		lag = r.Step(1400, 1)
	}
	if math.Abs(lag-before-24) > 1e-9 {
		t.Fatalf("60 s at 1400 msg/s added %v s of lag; want 24", lag-before)
	}
}

func TestReplicaLagDrainsAndStopsAtZero(t *testing.T) {
	r := NewReplicaLag(1000)
	for range 30 {
		r.Step(1500, 1) // 15,000 behind: 15 s
	}
	var lag float64
	for range 10 {
		lag = r.Step(500, 1) // drains 500 messages/s
	}
	if math.Abs(lag-10) > 1e-9 {
		t.Fatalf("after draining 10 s at 500 msg/s: lag %v; want 15 - 5 = 10 s", lag)
	}
	// At a constant rate equal to capacity it holds.
	for range 100 {
		lag = r.Step(1000, 1)
	}
	if math.Abs(lag-10) > 1e-9 {
		t.Fatalf("at capacity: lag %v; want held at 10 s", lag)
	}
	// Idle: it drains to 0 and no further, and the spare capacity is not
	// banked: the next excess shows at once.
	for range 1000 {
		lag = r.Step(0, 1)
	}
	if lag != 0 || r.Backlog() != 0 {
		t.Fatalf("idle for 1000 s: lag %v, backlog %v; want 0, 0", lag, r.Backlog())
	}
	if lag = r.Step(1100, 1); math.Abs(lag-0.1) > 1e-9 {
		t.Fatalf("one second at 1100 msg/s after idling: lag %v; want 0.1 s", lag)
	}
}

func TestReplicaLagMetricIsDelayed(t *testing.T) {
	// The lag reaches the controller like the CPU: averaged over the metric
	// period and published its delay after the period ends.
	rep := Replica{Capacity: 1000, Setpoint: 10, Band: 2, MetricPeriod: time.Minute, MetricDelay: 90 * time.Second}
	m := newLagMeter(rep)
	if dp, ok := m.pipe.Latest(); !ok || dp.Value != 0 {
		t.Fatalf("at the start: %+v %v; want a published lag of 0 from before the start", dp, ok)
	}
	var firstSeen time.Duration = -1
	for k := range 400 {
		tt := time.Duration(k) * time.Second
		m.pipe.Publish(tt)
		if dp, _ := m.pipe.Latest(); dp.Value > 0 && firstSeen < 0 {
			firstSeen = tt
		}
		lag := m.step(tt, time.Second, 1200)
		if k == 59 && math.Abs(lag-12) > 1e-9 {
			t.Fatalf("true lag after 60 s = %v; want 12 s", lag)
		}
	}
	// The first period [0, 60 s) ends at 60 s and is published 90 s later.
	if firstSeen != 150*time.Second {
		t.Fatalf("the lag was first seen at %v; want 150s (period 60 s + delay 90 s)", firstSeen)
	}
	if dp, _ := m.pipe.Latest(); math.Abs(dp.Value-(dp.Start.Seconds()+30)*0.2) > 0.2 {
		t.Fatalf("published %+v; want the period's average lag, 0.2 s per second at its middle", dp)
	}
}

func TestReplicaValidate(t *testing.T) {
	ok := ReplicaLagScenario()
	if err := ok.Validate(); err != nil {
		t.Fatalf("replica-lag scenario: %v", err)
	}
	for name, mut := range map[string]func(*Replica){
		"capacity":      func(r *Replica) { r.Capacity = 0 },
		"nan capacity":  func(r *Replica) { r.Capacity = math.NaN() },
		"setpoint":      func(r *Replica) { r.Setpoint = 0 },
		"band":          func(r *Replica) { r.Band = -1 },
		"metric period": func(r *Replica) { r.MetricPeriod = 0 },
		"metric delay":  func(r *Replica) { r.MetricDelay = -time.Second },
		"odd period":    func(r *Replica) { r.MetricPeriod = 1500 * time.Millisecond },
	} {
		s := ReplicaLagScenario()
		rep := *s.Replica
		mut(&rep)
		s.Replica = &rep
		if err := s.Validate(); err == nil {
			t.Errorf("%s: %+v validated", name, rep)
		}
	}
}
