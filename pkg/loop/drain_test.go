package loop

import (
	"math"
	"testing"
	"time"
)

// The replica's pace is the writes it applied between two readings over
// the time between them: the primary's writes between the instants a lag
// before each reading.
func TestDrainMeasuresTheReplicasPace(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(seconds(s)) }
	d := &Drain{}
	// 30 msg/s from 0 s, 10 msg/s from 20 s on.
	d.Record(at(0), 30)
	d.Record(at(20), 10)
	// Readings at 40 s (lag 25 s: applied up to what was written at 15 s)
	// and at 45 s (lag 22 s: up to 23 s). Applied in 5 s: 5 s at 30 and
	// 3 s at 10 = 180 messages: 36 msg/s.
	if !d.Measure(at(40), 25, at(45), 22, inf) || d.Pace != 36 || d.Last != 36 {
		t.Fatalf("first measure: %+v, want a pace of 36", d)
	}
	// The next: 45 s (22) to 50 s (24): up to 26 s, 3 s at 10 = 30
	// messages, 6 msg/s, averaged in over 30 s.
	if !d.Measure(at(45), 22, at(50), 24, inf) || d.Last != 6 {
		t.Fatalf("second measure: %+v, want the interval's 6", d)
	}
	a := 1 - math.Exp(-5.0/30)
	if want := 36 + a*(6-36); math.Abs(d.Pace-want) > 1e-9 {
		t.Fatalf("pace %v, want %v (the average over %v)", d.Pace, want, DrainSmoothing)
	}
	// A lag that grew by more than the interval: the replica applied
	// nothing.
	if !d.Measure(at(50), 24, at(55), 30, inf) || d.Last != 0 {
		t.Fatalf("stalled replica: %+v, want 0", d)
	}
	// Before the rates known: no measure.
	if d.Measure(at(0), 10, at(5), 10, inf) {
		t.Fatalf("measured an interval the rates do not cover: %+v", d)
	}
}

// Below DrainBacklog the replica may have been idle: the measure only
// raises the pace.
func TestDrainIdleReplicaOnlyRaisesThePace(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d := &Drain{Pace: 50}
	d.Record(t0, 20)
	d.Measure(t0.Add(10*time.Second), 0.5, t0.Add(15*time.Second), 0.4, inf)
	if d.Pace != 50 || d.Last < 19 || d.Last > 21 {
		t.Fatalf("idle replica at 20 msg/s lowered the pace: %+v", d)
	}
	d.Pace = 10
	d.Measure(t0.Add(15*time.Second), 0.4, t0.Add(20*time.Second), 0.5, inf)
	if d.Pace <= 10 || d.Pace > 20 {
		t.Fatalf("idle replica at 20 msg/s: pace %v, want raised toward 20", d.Pace)
	}
	// Consumers that took 12 msg/s of the 20 allowed (an empty queue):
	// the replica kept up with 12, which bounds what the measure says.
	d.Pace = 10
	d.Measure(t0.Add(20*time.Second), 0.4, t0.Add(25*time.Second), 0.5, 12)
	if d.Pace <= 10 || d.Pace > 12 {
		t.Fatalf("idle replica, consumers taking 12 msg/s of RATE 20: pace %v, want raised toward 12 at most", d.Pace)
	}
}

var inf = math.Inf(1)

// Record keeps what DrainHistory needs, and at most maxDrainRates rates.
func TestDrainRecordForgets(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d := &Drain{}
	for i := range 1000 {
		d.Record(t0.Add(time.Duration(i)*time.Second), float64(i))
	}
	if len(d.Rates) != maxDrainRates {
		t.Fatalf("%d rates kept, want %d", len(d.Rates), maxDrainRates)
	}
	d = &Drain{}
	for i := range 30 {
		d.Record(t0.Add(time.Duration(i)*time.Minute), float64(i))
	}
	if first := d.Rates[0].At; first.After(t0.Add(19*time.Minute)) || first.Before(t0.Add(18*time.Minute)) {
		t.Fatalf("oldest rate kept from %v, want the one in force %v before the last", first.Sub(t0), DrainHistory)
	}
	if d.Record(t0, math.NaN()); len(d.Rates) != 11 {
		t.Fatalf("a NaN rate was recorded: %d rates", len(d.Rates))
	}
}
