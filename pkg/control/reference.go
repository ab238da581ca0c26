package control

import (
	"math"
	"time"
)

// Segment is one piece of a piecewise-constant signal: Value holds from At
// (on the controller's Clock) until the next segment starts.
type Segment struct {
	At    time.Duration `json:"t"`
	Value float64       `json:"v"`
}

// maxSegments bounds the stored history so that State stays small enough for
// one DynamoDB item whatever the caller's timing.
const maxSegments = 512

// AppendSegment appends s to the history h (unless h already ends at its
// value), keeps at most the newest 512 segments, and drops those that ended
// before cutoff, keeping the one in force then: how the controller keeps
// State.Applied, for a controller of the caller's that keeps its own
// history of the rate (the lab's Smith predictor).
func AppendSegment(h []Segment, s Segment, cutoff time.Duration) []Segment {
	return pruneSegments(appendSegment(h, s), cutoff)
}

func appendSegment(h []Segment, s Segment) []Segment {
	if n := len(h); n > 0 && h[n-1].Value == s.Value {
		return h
	}
	h = append(h, s)
	if len(h) > maxSegments {
		h = append(h[:0:0], h[len(h)-maxSegments:]...)
	}
	return h
}

// pruneSegments drops segments that ended before cutoff, keeping the one in
// force at cutoff.
func pruneSegments(h []Segment, cutoff time.Duration) []Segment {
	i := 0
	for i+1 < len(h) && h[i+1].At <= cutoff {
		i++
	}
	if i == 0 {
		return h
	}
	return append(h[:0:0], h[i:]...)
}

// lagAt is the response at t of the first-order lag 1/(tau s + 1) to the
// piecewise-constant input h, assumed at steady state before its first
// segment (exact solution on each segment).
func lagAt(h []Segment, tau time.Duration, t time.Duration) float64 {
	if len(h) == 0 {
		return math.NaN()
	}
	y := h[0].Value
	for i, s := range h {
		if s.At >= t {
			break
		}
		end := t
		if i+1 < len(h) && h[i+1].At < t {
			end = h[i+1].At
		}
		if tau <= 0 {
			y = s.Value
			continue
		}
		y = s.Value + (y-s.Value)*math.Exp(-float64(end-s.At)/float64(tau))
	}
	return y
}

// expected is the measurement the model predicts, averaged over the Clock
// window [from, to], when the feedforward held the plant at the reference
// history h: the reference delayed by the model's dead time and filtered by
// its lag. It is the reference model of the two-degree-of-freedom controller.
func (m FOPDT) expected(h []Segment, from, to time.Duration) float64 {
	const n = 12
	if to <= from {
		return lagAt(h, m.Tau, to-m.DeadTime)
	}
	sum := 0.0
	step := float64(to-from) / n
	for k := 0; k < n; k++ {
		t := from + time.Duration((float64(k)+0.5)*step)
		sum += lagAt(h, m.Tau, t-m.DeadTime)
	}
	return sum / n
}
