package loop

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// The inner_* PARAMS attributes: the consumers' inner loop on their sink's
// latency (consume.InnerLoop), declared in paramTable.

// Attribute names of the inner loop.
const (
	attrInnerLoop         = "inner_loop"
	attrInnerTolerance    = "inner_tolerance"
	attrInnerTrip         = "inner_trip"
	attrInnerReactionTime = "inner_reaction_time"
)

// The inner loop's defaults: those that hold the reference plant
// (docs/consumers.md, "The inner loop").
const (
	DefaultInnerTolerance    = 0.2
	DefaultInnerReactionTime = 20 * time.Second
)

// InnerParams are the loop's settings of its consumers' inner loop.
type InnerParams struct {
	// Tolerance is the rise of the latency, relative to the one learned at
	// the setpoint, at which the inner loop cuts.
	Tolerance float64 `json:"tolerance"`
	// Trip, when set, is the rise at which it cuts instead; the tolerance
	// still judges the share's steadiness (consume.InnerConfig.Trip). 0:
	// the tolerance.
	Trip float64 `json:"trip,omitempty"`
	// ReactionTime is its integral time: about the destination's dead
	// time plus lag.
	ReactionTime time.Duration `json:"reaction_time"`
}

// InnerConfig is the consume.InnerConfig of p's inner loop, and false when
// the loop's consumers run none (inner_loop false).
func (p Params) InnerConfig() (consume.InnerConfig, bool) {
	if p.Inner == nil {
		return consume.InnerConfig{}, false
	}
	return consume.InnerConfig{Tolerance: p.Inner.Tolerance, Trip: p.Inner.Trip, ReactionTime: p.Inner.ReactionTime}, true
}

// innerSettings is what RATE carries of p's inner loop: nil when it is off.
// unsettled is whether the tick found the loop away from its setpoint
// (innerUnsettled).
func (p Params) innerSettings(unsettled bool) *protocol.InnerSettings {
	if p.Inner == nil {
		return nil
	}
	return &protocol.InnerSettings{Tolerance: p.Inner.Tolerance, Trip: p.Inner.Trip, ReactionTime: p.Inner.ReactionTime,
		Settle: InnerSettleTicks * p.TickPeriod, Unsettled: unsettled}
}

// innerUnsettled reports whether a tick whose datapoint was measured
// (stale: none fresh) against setpoint leaves the loop unsettled for the
// consumers' inner loop: no fresh datapoint, or one more than
// protocol.InnerSettledBand points from the setpoint.
func innerUnsettled(stale bool, measured, setpoint float64) bool {
	return stale || !(math.Abs(measured-setpoint) <= protocol.InnerSettledBand)
}

// InnerSettleTicks is how many of the loop's ticks the consumers' share must
// hold steady before their inner loop learns the latency at the setpoint
// (RATE's inner settle): the outer loop has settled by then.
const InnerSettleTicks = 3

// inner_loop true creates Params.Inner with the defaults; the other inner_*
// attributes need it.
var innerLoop = codec{
	decode: func(d *decoder, p *Params, name string) {
		if d.boolean(name, false) {
			p.Inner = &InnerParams{Tolerance: DefaultInnerTolerance, ReactionTime: DefaultInnerReactionTime}
		}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Inner != nil {
			a[name] = true
		}
	},
}

// needsInner reports whether an inner_* attribute can be read: refused
// while the inner loop is not turned on, unless inner_loop is set to false
// (turned off, its tuning kept in PARAMS and unused until it is on again).
func needsInner(d *decoder, p *Params, name string) bool {
	if p.Inner != nil {
		return true
	}
	if d.present(name) && !d.present(attrInnerLoop) {
		d.fail(name, "the inner loop is off; set %s to true first", attrInnerLoop)
	}
	return false
}

// innerNumber is the codec of a number of InnerParams with default def;
// omitZero leaves out (and, unset, does not bound) a field whose 0 means
// "as another one".
func innerNumber(field func(*InnerParams) *float64, def float64, omitZero bool) codec {
	set := func(p Params) bool { return p.Inner != nil && (!omitZero || *field(p.Inner) != 0) }
	return codec{
		decode: func(d *decoder, p *Params, name string) {
			if needsInner(d, p, name) {
				*field(p.Inner) = d.number(name, def)
			}
		},
		encode: func(p Params, a map[string]any, name string) {
			if set(p) {
				a[name] = *field(p.Inner)
			}
		},
		value: func(p Params) any {
			if !set(p) {
				return nil
			}
			return *field(p.Inner)
		},
	}
}

var innerTolerance = innerNumber(func(in *InnerParams) *float64 { return &in.Tolerance }, DefaultInnerTolerance, false)

// inner_trip absent (0): the cut engages at the tolerance.
var innerTrip = innerNumber(func(in *InnerParams) *float64 { return &in.Trip }, 0, true)

var innerReactionTime = codec{
	decode: func(d *decoder, p *Params, name string) {
		if needsInner(d, p, name) {
			p.Inner.ReactionTime = d.duration(name, DefaultInnerReactionTime)
		}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Inner != nil {
			a[name] = p.Inner.ReactionTime.String()
		}
	},
	value: func(p Params) any {
		if p.Inner == nil {
			return nil
		}
		return p.Inner.ReactionTime
	},
}
