package lab

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
)

// Override is the override (selector) loop: the CPU's pi-aw-spf-ff and a PI
// on the replica's lag, the lower rate wins (control.Override).
const Override = "override"

// known lists every controller name ParseControllers accepts.
func known() []string { return append(Controllers(), Override) }

// DefaultControllers are the controllers Compare runs when none are named:
// all of Controllers, or on a scenario with a replica pi-aw-spf-ff (the CPU
// alone) and override (the CPU and the lag).
func DefaultControllers(s sim.Scenario) []string {
	if s.Replica != nil {
		return []string{PIAWSPFF, Override}
	}
	return Controllers()
}

// ReplicaModel is what the replica's step test taught: the apply capacity,
// from the slope of the lag while the primary took writes faster.
type ReplicaModel struct {
	Capacity float64 `json:"capacity"`
	// StepRate is the write rate of the test, StepS its length, seconds.
	StepRate float64 `json:"step_rate"`
	StepS    float64 `json:"step_s"`
	// LagSlope is the lag's growth during the test, seconds per second.
	LagSlope float64 `json:"lag_slope"`
}

// replicaStep is the length of the replica's step test.
const replicaStep = 5 * time.Minute

// IdentifyReplica runs an open-loop test on the scenario's replica: writes
// at half the max rate (doubled, up to the max rate, while the replica keeps
// up) for five minutes from an up-to-date replica, the lag sampled every
// second. The lag of an integrating replica grows at (rate - capacity) /
// capacity, so the least-squares slope s of the lag gives capacity = rate /
// (1 + s). The true capacity is never read.
func IdentifyReplica(s sim.Scenario) (ReplicaModel, error) {
	if s.Replica == nil {
		return ReplicaModel{}, errors.New("the scenario has no replica")
	}
	for u := s.MaxRate / 2; ; u = math.Min(2*u, s.MaxRate) {
		r := sim.NewReplicaLag(s.Replica.Capacity)
		n := int(replicaStep / time.Second)
		var st, sy, stt, sty float64
		for k := 1; k <= n; k++ {
			t, y := float64(k), r.Step(u, 1)
			st, sy, stt, sty = st+t, sy+y, stt+t*t, sty+t*y
		}
		fn := float64(n)
		slope := (fn*sty - st*sy) / (fn*stt - st*st)
		if slope > 0 {
			return ReplicaModel{Capacity: u / (1 + slope), StepRate: u, StepS: replicaStep.Seconds(), LagSlope: slope}, nil
		}
		if u >= s.MaxRate {
			return ReplicaModel{}, fmt.Errorf("replica step test: no lag at the max rate %v messages/s: the replica keeps up, there is no lag to control", s.MaxRate)
		}
	}
}

// LagDeadTime is the lag loop's dead time: the lag metric's period / 2 and
// publication delay and the tick / 2 (the replica applies what the primary
// took at once; its lag shows through the metric only).
func LagDeadTime(s sim.Scenario) time.Duration {
	return s.Replica.MetricPeriod/2 + s.Replica.MetricDelay + s.Tick/2
}

// LagGains are SIMC's PI gains for the lag, an integrating process
// (Skogestad 2003, eq. (29)-(30) for k'e^{-theta s}/s): the lag grows at
// (rate - capacity)/capacity, so the integrating gain is k' = 1/capacity
// (seconds of lag per second per message/s), and with tau_c = theta,
// Kp = 1/(k' (tau_c + theta)) = capacity/(2 theta) messages/s per second of
// lag, Ti = 4 (tau_c + theta) = 8 theta, Ki = Kp/Ti.
func LagGains(capacity float64, theta time.Duration) (kp, ki float64) {
	th := theta.Seconds()
	kp = capacity / (2 * th)
	return kp, kp / (8 * th)
}

// overridePolicy runs the override loop in the lab: the CPU's controller and
// the lag's, selected by control.Override.
type overridePolicy struct {
	o        control.Override
	limiting string
}

func (p *overridePolicy) Rate(o sim.Observation) float64 {
	in := []control.SignalInput{{Name: sim.SignalCPU, Input: input(o)}}
	for _, sig := range o.Signals {
		x := signalIn(o, sig)
		if c := p.o.Controllers[sig.Name]; x.Measurement <= 0 && c.Config.Kp > 0 {
			x.Setpoint = x.Measurement + c.Config.Max/c.Config.Kp
		}
		in = append(in, control.SignalInput{Name: sig.Name, Input: x})
	}
	out := p.o.Update(in)
	p.limiting = out.Limiting
	return out.Rate
}

func (p *overridePolicy) Limiting() string { return p.limiting }

// signalIn is a controller input for one more plant output, like input is
// for the CPU.
func signalIn(o sim.Observation, sig sim.SignalObservation) control.Input {
	in := input(o)
	in.Setpoint, in.Measurement, in.MeasurementAge, in.MeasurementPeriod = sig.Setpoint, math.NaN(), 0, 0
	if sig.OK {
		in.Measurement = sig.Datapoint.Value
		in.MeasurementAge = o.Now - sig.Datapoint.End()
		in.MeasurementPeriod = sig.Datapoint.Period
	}
	return in
}

// newOverride builds the override loop: pi-aw-spf-ff on the CPU as NewPolicy
// tunes it, and a PI with conditional anti-windup on the lag tuned by
// LagGains from the replica's step test.
func newOverride(s sim.Scenario, p Plant, g Gains) (sim.Policy, map[string]float64, error) {
	if s.Replica == nil || p.Replica.Capacity <= 0 {
		return nil, nil, errors.New("override: the scenario has no replica (the lag is its second signal), or its step test is missing")
	}
	cpu, tun, err := ControllerConfig(PIAWSPFF, s, p, g)
	if err != nil {
		return nil, nil, err
	}
	kp, ki := LagGains(p.Replica.Capacity, LagDeadTime(s))
	lag := control.Config{Kp: kp, Ki: ki, Min: 0, Max: s.MaxRate, AntiWindup: control.AntiWindupConditional}
	if err := lag.Validate(); err != nil {
		return nil, nil, fmt.Errorf("override: lag: %w", err)
	}
	tun["lag_kp"], tun["lag_ki"], tun["lag_dead_time_s"] = kp, ki, LagDeadTime(s).Seconds()
	return &overridePolicy{o: control.Override{Controllers: map[string]*control.Controller{
		sim.SignalCPU: {Config: cpu},
		sim.SignalLag: {Config: lag},
	}}}, tun, nil
}
