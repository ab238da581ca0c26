package loop

import (
	"math"
	"slices"
	"time"
)

// A replication lag measured as an age (the heartbeat's, RDS's ReplicaLag,
// Seconds_Behind_Master) says how fast the replica applies: the writes it
// applied between two readings are those the primary took between the two
// instants a lag before them. With the rates applied (RATE, which consumers
// with a backlog follow), the replica's pace over the interval is
//
//	pace = ∫ rate(s) ds over [t0 - lag0, t1 - lag1], divided by t1 - t0,
//
// without the lag's slope or any model: whatever the replica's capacity
// does (a CPU quota, a load on the machine), the measure follows it. It is
// exact while the replica has writes to apply throughout (a lag of a
// few seconds or more); below that it may have been idle part of the interval,
// and the measure only says the pace is at least that much.

// Drain is a lag signal's measure of the replica's pace (drain_feedforward).
type Drain struct {
	// Rates are the rates applied from each tick on, oldest first, over
	// the last DrainHistory.
	Rates []RateAt `json:"rates,omitempty"`
	// Pace is the measure, messages/s, averaged over DrainSmoothing; 0
	// until measured.
	Pace float64 `json:"pace"`
	// Last is the last interval's own measure (NaN never: 0 when none).
	Last float64 `json:"last"`
}

// RateAt is a rate applied from At on.
type RateAt struct {
	At   time.Time `json:"t"`
	Rate float64   `json:"r"`
}

const (
	// DrainHistory bounds the rates kept: the longest lag measured.
	DrainHistory = 10 * time.Minute
	// DrainSmoothing is the time constant of the pace's average: a
	// reading's saw-tooth (the replica applies transactions, the heartbeat
	// lands between them) moves one interval's measure by a second's
	// writes.
	DrainSmoothing = 30 * time.Second
	// DrainBacklog is the lag above which the replica counts as busy
	// throughout an interval: a heartbeat lag saw-tooths by 1 to 2.5 s while
	// the replica keeps up (it applies transactions, the heartbeat lands
	// between them).
	DrainBacklog = 3 * time.Second
	// maxDrainRates bounds Rates whatever the tick period.
	maxDrainRates = 256
)

// Clone returns a deep copy of d (nil for nil).
func (d *Drain) Clone() *Drain {
	if d == nil {
		return nil
	}
	c := *d
	c.Rates = slices.Clone(d.Rates)
	return &c
}

// Measure takes the readings lag0 at t0 and lag1 at t1 (seconds, t1 after
// t0) and updates the pace: averaged in while both readings are at least
// DrainBacklog; below, only raised (the replica may have been idle), and
// never above taken, what the consumers stored (the processed rate; +Inf
// when unknown): consumers without a backlog write less than RATE, and a
// replica that kept up with them says nothing of a pace above it. It
// reports whether the interval was measured (the rates cover it).
func (d *Drain) Measure(t0 time.Time, lag0 float64, t1 time.Time, lag1, taken float64) bool {
	dt := t1.Sub(t0).Seconds()
	if dt <= 0 || !finite(lag0) || !finite(lag1) || lag0 < 0 || lag1 < 0 {
		return false
	}
	from := t0.Add(-seconds(lag0))
	to := t1.Add(-seconds(lag1))
	written, ok := d.written(from, to)
	if !ok {
		return false
	}
	pace := written / dt
	d.Last = pace
	busy := math.Min(lag0, lag1) >= DrainBacklog.Seconds()
	switch {
	case d.Pace <= 0:
		d.Pace = math.Min(pace, taken)
	case busy:
		d.Pace += (1 - math.Exp(-dt/DrainSmoothing.Seconds())) * (pace - d.Pace)
	case math.Min(pace, taken) > d.Pace:
		// A lower bound: followed up three times as fast (a rate that
		// climbs toward the replica's pace is not left behind).
		d.Pace += (1 - math.Exp(-3*dt/DrainSmoothing.Seconds())) * (math.Min(pace, taken) - d.Pace)
	}
	return true
}

// written integrates the rates applied over [from, to] (0 when to is not
// after from: the replica applied nothing); false when the rates do not
// reach back to from.
func (d *Drain) written(from, to time.Time) (float64, bool) {
	if len(d.Rates) == 0 || from.Before(d.Rates[0].At) {
		return 0, false
	}
	sum := 0.0
	for i, r := range d.Rates {
		end := to
		if i+1 < len(d.Rates) && d.Rates[i+1].At.Before(to) {
			end = d.Rates[i+1].At
		}
		start := r.At
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			sum += r.Rate * end.Sub(start).Seconds()
		}
	}
	return sum, true
}

// Record notes the rate applied from now on, and forgets what no lag up
// to DrainHistory needs.
func (d *Drain) Record(now time.Time, rate float64) {
	if !finite(rate) {
		return
	}
	d.Rates = append(d.Rates, RateAt{At: now, Rate: rate})
	cut := 0
	for cut+1 < len(d.Rates) && !d.Rates[cut+1].At.After(now.Add(-DrainHistory)) {
		cut++
	}
	cut = max(cut, len(d.Rates)-maxDrainRates)
	d.Rates = d.Rates[cut:]
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
