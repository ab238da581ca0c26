// Package history is a loop's record as the dashboard charts it: one Point
// per applied controller tick (setpoint, measured signal, allowed and consumed
// rate, the controller's terms, queue depth, mode). The controller appends a
// point after each tick (pkg/adapter/ddbhistory stores them in the loop's
// table as HIST items with a TTL); readers get them oldest first. File is a
// loop's history as one JSON document (what `sluice demo --history-out`
// writes and `sluice tune` reads), and RawConsumed turns the controller's
// averaged consumed rate back into the rate of each tick.
package history

import (
	"encoding/json"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// Point is one controller tick of one loop, as the dashboard charts it and as
// a history item stores it.
type Point struct {
	// T is the tick time.
	T time.Time
	// Setpoint is the CPU setpoint, percent.
	Setpoint float64
	// Measured is the measured CPU, percent; NaN when the metric was missing
	// or stale.
	Measured float64
	// Rate is the allowed rate the controller computed, messages/s.
	Rate float64
	// Consumed is the rate the consumers actually achieved, messages/s; NaN
	// when unknown.
	Consumed float64
	// ConsumedSmoothing is the time constant of the exponential average
	// that Consumed is (the controller's, loop.ProcessedSmoothing); zero
	// when Consumed is the raw rate since the previous point (a simulated
	// world, a point stored before this field). RawConsumed undoes it.
	ConsumedSmoothing time.Duration
	// P, I and FF are the proportional, integral and feedforward terms of
	// the controller output, messages/s.
	P, I, FF float64
	// Saturated reports that the output hit a bound or the slew limit.
	Saturated bool
	// Stale reports that the metric was missing or stale at this tick.
	Stale bool
	// Depth is the queue depth (SQS) or consumer lag (Kafka), messages; NaN
	// when unknown.
	Depth float64
	// Mode is the loop's mode at this tick: auto, manual or shadow.
	Mode string
	// ModelDrift reports that the loop's STATE says the plant moved away
	// from its model (loop.DriftState).
	ModelDrift bool
	// Limited reports that the loop was limited by demand at this tick:
	// the consumers took clearly less than allowed and the controller held
	// the rate near what they took.
	Limited bool
	// Limiting names the signal whose controller set the rate, and Signals
	// are every signal's setpoint and measurement: for a loop with several
	// signals (override control; loop.Params.Signals); empty for one.
	Limiting string
	Signals  []SignalPoint
	// Reason is what set the rate at this tick: its code
	// (loop.ReasonCode) and sentence; empty for a point stored before
	// reasons were kept.
	Reason     string
	ReasonText string
	// InnerLatency is the consumers' mean store latency per message as
	// their inner loops measure it, InnerReference the mean latency they
	// learned at the setpoint, and Withheld the rate their cut held back
	// below their shares since the previous tick, messages/s: zero while
	// no consumer runs an inner loop (loop.DemandReport).
	InnerLatency   time.Duration
	InnerReference time.Duration
	Withheld       float64
}

// SignalPoint is one signal of a loop with several signals at one tick.
type SignalPoint struct {
	Name string
	Unit string
	// Setpoint is the signal's setpoint and Measured its measurement (NaN
	// when missing or stale), in Unit.
	Setpoint float64
	Measured float64
}

// signalJSON is SignalPoint on the wire: an unknown measurement is null.
type signalJSON struct {
	Name     string   `json:"name"`
	Unit     string   `json:"unit,omitempty"`
	Setpoint *float64 `json:"setpoint"`
	Measured *float64 `json:"measured"`
}

// MarshalJSON encodes the signal with an unknown measurement (NaN) as null.
func (s SignalPoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(signalJSON{Name: s.Name, Unit: s.Unit, Setpoint: num(s.Setpoint), Measured: num(s.Measured)})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (s *SignalPoint) UnmarshalJSON(b []byte) error {
	var j signalJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = SignalPoint{Name: j.Name, Unit: j.Unit, Setpoint: unnum(j.Setpoint), Measured: unnum(j.Measured)}
	return nil
}

// pointJSON is Point on the wire: unknown values (NaN) are null.
type pointJSON struct {
	T         int64         `json:"t"` // unix milliseconds
	Setpoint  *float64      `json:"setpoint"`
	Measured  *float64      `json:"measured"`
	Rate      *float64      `json:"rate"`
	Consumed  *float64      `json:"consumed"`
	Smoothing float64       `json:"consumed_smoothing_s,omitempty"`
	P         *float64      `json:"p"`
	I         *float64      `json:"i"`
	FF        *float64      `json:"ff"`
	Saturated bool          `json:"saturated"`
	Stale     bool          `json:"stale"`
	Depth     *float64      `json:"depth"`
	Mode      string        `json:"mode,omitempty"`
	Drift     bool          `json:"model_drift,omitempty"`
	Limited   bool          `json:"limited,omitempty"`
	Limiting  string        `json:"limiting,omitempty"`
	Signals   []SignalPoint `json:"signals,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Text      string        `json:"reason_text,omitempty"`
	Latency   float64       `json:"inner_latency_ms,omitempty"`
	Reference float64       `json:"inner_reference_ms,omitempty"`
	Withheld  float64       `json:"withheld,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fromMS(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func unnum(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// MarshalJSON encodes the point with its time in unix milliseconds and
// unknown (NaN) values as null.
func (p Point) MarshalJSON() ([]byte, error) {
	return json.Marshal(pointJSON{
		T: p.T.UnixMilli(), Setpoint: num(p.Setpoint), Measured: num(p.Measured),
		Rate: num(p.Rate), Consumed: num(p.Consumed), Smoothing: p.ConsumedSmoothing.Seconds(),
		P: num(p.P), I: num(p.I), FF: num(p.FF), Saturated: p.Saturated, Stale: p.Stale, Depth: num(p.Depth), Mode: p.Mode,
		Drift:   p.ModelDrift,
		Limited: p.Limited, Limiting: p.Limiting, Signals: p.Signals,
		Reason: p.Reason, Text: p.ReasonText,
		Latency: ms(p.InnerLatency), Reference: ms(p.InnerReference), Withheld: p.Withheld,
	})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (p *Point) UnmarshalJSON(b []byte) error {
	var j pointJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Point{
		T: time.UnixMilli(j.T).UTC(), Setpoint: unnum(j.Setpoint), Measured: unnum(j.Measured),
		Rate: unnum(j.Rate), Consumed: unnum(j.Consumed), ConsumedSmoothing: time.Duration(j.Smoothing * float64(time.Second)),
		P: unnum(j.P), I: unnum(j.I), FF: unnum(j.FF),
		Saturated: j.Saturated, Stale: j.Stale, Depth: unnum(j.Depth), Mode: j.Mode,
		ModelDrift: j.Drift,
		Limited:    j.Limited, Limiting: j.Limiting, Signals: j.Signals,
		Reason: j.Reason, ReasonText: j.Text,
		InnerLatency: fromMS(j.Latency), InnerReference: fromMS(j.Reference), Withheld: j.Withheld,
	}
	return nil
}

// FromReport returns the history point of one loop's controller tick at
// t, and false when the tick wrote nothing (lost to another invocation, not
// due, disabled, without parameters, failed). The consumed rate is what the
// consumers reported storing since the previous tick, averaged as the
// controller averages it (ConsumedSmoothing), and the depth the
// queue's metric (PARAMS depth_queue); NaN when unknown. While the metric is
// stale the controller holds its output and does not compute its terms, so
// P, I and FF are NaN (a gap on the chart).
func FromReport(t time.Time, r loop.Report) (Point, bool) {
	if r.Outcome != loop.OutcomeApplied {
		return Point{}, false
	}
	p := Point{
		T: t, Setpoint: r.Setpoint, Measured: r.Measured, Rate: r.Rate, Consumed: math.NaN(),
		P: r.P, I: r.I, FF: r.FF, Saturated: r.Saturated, Stale: r.Stale, Depth: math.NaN(), Mode: string(r.Mode),
		ModelDrift:   r.ModelDrift,
		Limited:      r.DemandLimited,
		InnerLatency: r.InnerLatency, InnerReference: r.InnerReference, Withheld: r.Withheld,
	}
	if r.ProcessedKnown {
		p.Consumed, p.ConsumedSmoothing = r.Processed, loop.ProcessedSmoothing
	}
	if r.DepthKnown {
		p.Depth = r.Depth
	}
	if r.Stale {
		p.Measured, p.P, p.I, p.FF = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	}
	p.Limiting = r.Limiting
	if r.Reason != nil {
		p.Reason, p.ReasonText = string(r.Reason.Code), r.Reason.Text
	}
	if len(r.Signals) < 2 {
		return p, true // one signal: the point's own fields are its
	}
	for _, s := range r.Signals {
		sp := SignalPoint{Name: s.Name, Unit: s.Unit, Setpoint: s.Setpoint, Measured: s.Measured}
		if s.Stale {
			sp.Measured = math.NaN()
		}
		p.Signals = append(p.Signals, sp)
	}
	return p, true
}

// RawConsumed returns a copy of pts in which every consumed rate that is an
// exponential average (ConsumedSmoothing > 0) is turned back into the rate
// since the previous point, exactly: the average restarts where the rate was
// unknown, so a point whose previous rate is unknown keeps its figure. The
// raw rate is what an identification needs as its input: at a tick much
// shorter than the smoothing the average lags the rate that loaded the
// destination.
func RawConsumed(pts []Point) []Point {
	out := append([]Point(nil), pts...)
	for i := range out {
		out[i].ConsumedSmoothing = 0
		tau := pts[i].ConsumedSmoothing
		if i == 0 || tau <= 0 {
			continue
		}
		prev, cur := pts[i-1].Consumed, pts[i].Consumed
		dt := pts[i].T.Sub(pts[i-1].T)
		if math.IsNaN(prev) || math.IsNaN(cur) || dt <= 0 {
			continue
		}
		a := math.Exp(-dt.Seconds() / tau.Seconds())
		out[i].Consumed = max(0, (cur-a*prev)/(1-a))
	}
	return out
}
