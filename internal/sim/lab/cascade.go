package lab

import (
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Cascade is pi-aw-spf-ff over the consumers' inner loop on their store
// latency (consume.InnerLoop): the outer loop sets the allowed rate once a
// tick from the CPU's datapoints, the inner loop cuts the pace below it
// within seconds when the destination's latency rises.
const Cascade = "cascade"

// cascadePolicy is the cascade in the lab: the outer controller and the
// inner loop of the consumers (one aggregate consumer: its share is the
// allowed rate).
type cascadePolicy struct {
	outer *pidPolicy
	inner *consume.InnerLoop
	// unsettled is the last tick's verdict, as the controller's RATE
	// carries it: no datapoint, or one off the setpoint by more than
	// protocol.InnerSettledBand.
	unsettled bool
}

// newCascade builds the cascade from the pi-aw-spf-ff that NewPolicy tunes
// and the inner loop's defaults, with its reaction time set, as an operator
// would from the step test, to the identified dead time plus lag.
func newCascade(s sim.Scenario, p Plant, g Gains) (sim.Policy, map[string]float64, error) {
	pol, tun, err := NewPolicy(PIAWSPFF, s, p, g)
	if err != nil {
		return nil, nil, err
	}
	in := consume.NewInnerLoop(consume.InnerConfig{ReactionTime: InnerReactionTime(p.Model)})
	tun["inner_tolerance"] = in.Config.Tolerance
	tun["inner_reaction_time_s"] = in.Config.ReactionTime.Seconds()
	return &cascadePolicy{outer: pol.(*pidPolicy), inner: in}, tun, nil
}

// Rate is the outer loop's tick. It is told the rate the consumers would
// have taken without the inner loop's cut (what they processed plus what
// the cut withheld from a full queue): the cut holds the CPU at the setpoint
// for it, so it is neither windup for its integrator nor a plant whose gain
// changed for its online identification.
func (c *cascadePolicy) Rate(o sim.Observation) float64 {
	in := input(o)
	in.ActualRate = o.Processed + o.Withheld
	c.unsettled = !(math.Abs(in.Measurement-o.Setpoint) <= protocol.InnerSettledBand)
	return c.outer.c.Update(in).Rate
}

// Pace is the inner loop's step: it learns from the batch just completed
// and cuts the pace below the allowed rate.
func (c *cascadePolicy) Pace(t time.Duration, allowed, latency float64, done int64) float64 {
	now := time.Unix(0, 0).Add(t) // the inner loop's clock: the run's time
	if c.unsettled {
		c.inner.Unsettled(now)
	}
	if done > 0 && !math.IsNaN(latency) {
		c.inner.Observe(consume.InnerSample{At: now, Messages: int(done), PerMessage: time.Duration(latency * float64(time.Second))})
	}
	return c.inner.Pace(now, allowed)
}

// InnerReactionTime is the inner loop's reaction time for a destination
// with model m: its dead time plus its lag (the time a cut takes to show in
// the latency), at least a second.
func InnerReactionTime(m control.FOPDT) time.Duration {
	return max(m.DeadTime+m.Tau, time.Second).Round(time.Second)
}
