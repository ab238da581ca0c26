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

// limiter is a policy that reports which signal limits: cpu until 10 min,
// then lag, then cpu again from 20 min.
type limiter struct {
	rate float64
	now  time.Duration
	seen []Observation
}

func (l *limiter) Rate(o Observation) float64 {
	l.now = o.Now
	l.seen = append(l.seen, o)
	return l.rate
}

func (l *limiter) Limiting() string {
	if l.now >= 10*time.Minute && l.now < 20*time.Minute {
		return SignalLag
	}
	return SignalCPU
}

func TestRunWithReplica(t *testing.T) {
	s := ReplicaLagScenario()
	s.Duration = 30 * time.Minute
	p := &limiter{rate: 1200}
	r, err := Run(s, p)
	if err != nil {
		t.Fatal(err)
	}
	ser := r.Series
	if len(ser.Lag) != len(ser.T) || len(ser.LagMeasured) != len(ser.T) || len(ser.Limiting) != len(ser.T) {
		t.Fatalf("series lengths: t %d, lag %d, measured %d, limiting %d", len(ser.T), len(ser.Lag), len(ser.LagMeasured), len(ser.Limiting))
	}
	// The consumers start one step late; then 200 msg/s over capacity.
	if got, want := ser.Lag[len(ser.Lag)-1], 0.2*(30*60-2); math.Abs(got-want) > 0.5 {
		t.Fatalf("lag after 30 min at 1200 msg/s = %v; want about %v", got, want)
	}
	// Every tick sees the lag's newest published datapoint, never the truth.
	for _, o := range p.seen {
		if len(o.Signals) != 1 || o.Signals[0].Name != SignalLag || o.Signals[0].Setpoint != 10 || !o.Signals[0].OK {
			t.Fatalf("tick at %v: signals %+v; want the lag with setpoint 10", o.Now, o.Signals)
		}
		if age := o.Now - o.Signals[0].Datapoint.End(); age < s.Replica.MetricDelay {
			t.Fatalf("tick at %v saw a lag datapoint %v old; want at least the publication delay", o.Now, age)
		}
	}
	if ser.Limiting[0] != SignalCPU || ser.Limiting[15*60] != SignalLag || ser.Limiting[25*60] != SignalCPU {
		t.Fatalf("limiting at 0, 15, 25 min: %q %q %q", ser.Limiting[0], ser.Limiting[15*60], ser.Limiting[25*60])
	}
	if got := LimitingSwitches(ser); got != 2 {
		t.Fatalf("LimitingSwitches = %d; want 2", got)
	}
	// A scenario without a replica has no lag series and its observations no
	// extra signal.
	q := &limiter{rate: 1200}
	s.Replica = nil
	r, err = Run(s, q)
	if err != nil {
		t.Fatal(err)
	}
	if r.Series.Lag != nil || q.seen[3].Signals != nil {
		t.Fatalf("no replica: lag series %d long, signals %+v", len(r.Series.Lag), q.seen[3].Signals)
	}
}

func TestSignalMetrics(t *testing.T) {
	s := ReplicaLagScenario()
	s.Duration = 9 * time.Second
	s.Step = time.Second
	ser := Series{
		T:        []float64{1, 2, 3, 4, 5, 6, 7, 8, 9},
		Setpoint: []float64{70, 70, 70, 70, 70, 70, 70, 70, 70},
		CPU:      []float64{60, 70, 73, 72, 71, 69, 70, 70, 70},
		Lag:      []float64{0, 5, 8, 13, 11, 10, 9, 10, 11},
		Limiting: []string{"cpu", "cpu", "cpu", "lag", "lag", "lag", "lag", "lag", "lag"},
	}
	got := SignalMeasures(s, ser)
	if len(got) != 2 || got[0].Name != SignalCPU || got[1].Name != SignalLag {
		t.Fatalf("signals %+v; want cpu then lag", got)
	}
	cpu, lag := got[0], got[1]
	// Settled after a third of the run: from t = 3 s on, the samples that
	// end after it (t = 4..9).
	if cpu.SettleS != 3 || math.Abs(cpu.MeanAfterSettle-(72+71+69+70+70+70)/6.0) > 1e-9 || cpu.Max != 73 {
		t.Fatalf("cpu %+v", cpu)
	}
	// CPU limits for the first 3 s: |70-60| + 0 + 3; above 70 + 2 once.
	if cpu.IAELimiting != 13 || cpu.AboveBandS != 1 || cpu.LimitingS != 3 {
		t.Fatalf("cpu IAE while limiting %v, above band %v s, limiting %v s; want 13, 1, 3", cpu.IAELimiting, cpu.AboveBandS, cpu.LimitingS)
	}
	if lag.Setpoint != 10 || lag.Band != 2 || lag.Max != 13 || math.Abs(lag.MeanAfterSettle-64.0/6) > 1e-9 {
		t.Fatalf("lag %+v", lag)
	}
	if lag.IAELimiting != 3+1+0+1+0+1 || lag.AboveBandS != 1 || lag.LimitingS != 6 {
		t.Fatalf("lag IAE while limiting %v, above band %v, limiting %v; want 6, 1, 6", lag.IAELimiting, lag.AboveBandS, lag.LimitingS)
	}
	// Without a replica and without Limiting, the CPU limits throughout.
	s.Replica = nil
	ser.Lag, ser.Limiting = nil, nil
	got = SignalMeasures(s, ser)
	if len(got) != 1 || got[0].LimitingS != 9 || got[0].IAELimiting != 10+0+3+2+1+1 {
		t.Fatalf("one signal: %+v", got)
	}
}
