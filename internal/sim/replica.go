package sim

import (
	"fmt"
	"math"
	"time"
)

// SignalCPU and SignalLag name the plant's outputs as the lab reports them.
const (
	SignalCPU = "cpu"
	SignalLag = "lag"
)

// Replica is a read replica of the destination that applies the primary's
// writes at a fixed capacity, lower than what the primary can take: its
// replication lag is the plant's second output, published like the CPU
// (averaged over MetricPeriod, MetricDelay after the period ends; RDS's
// ReplicaLag is a CloudWatch metric).
type Replica struct {
	// Capacity is the rate the replica applies, messages/s.
	Capacity float64 `json:"capacity"`
	// Setpoint is the lag setpoint, seconds; Band the band above it that
	// counts as held (lab measures).
	Setpoint float64 `json:"setpoint"`
	Band     float64 `json:"band"`
	// MetricPeriod and MetricDelay are the lag metric's averaging period and
	// publication delay.
	MetricPeriod time.Duration `json:"metric_period"`
	MetricDelay  time.Duration `json:"metric_delay"`
}

// validate checks the replica against integration step h.
func (r Replica) validate(h time.Duration) error {
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !fin(r.Capacity) || r.Capacity <= 0 || r.Capacity > 1e9:
		return fmt.Errorf("replica capacity %v: must be in (0, 1e9] messages/s", r.Capacity)
	case !fin(r.Setpoint) || r.Setpoint <= 0 || r.Setpoint > 86400:
		return fmt.Errorf("lag setpoint %v: must be in (0, 86400] s", r.Setpoint)
	case !fin(r.Band) || r.Band < 0 || r.Band > 86400:
		return fmt.Errorf("lag band %v: must be in [0, 86400] s", r.Band)
	case r.MetricPeriod <= 0 || r.MetricPeriod > 24*time.Hour || r.MetricPeriod%h != 0:
		return fmt.Errorf("lag metric period %v: must be positive, at most 24h and a multiple of the integration step %v", r.MetricPeriod, h)
	case r.MetricDelay < 0 || r.MetricDelay > 24*time.Hour:
		return fmt.Errorf("lag metric delay %v: must be in [0, 24h]", r.MetricDelay)
	}
	return nil
}

// ReplicaLag is the replica's replication lag, an integrating process: the
// backlog of writes not yet applied grows at (write rate - capacity) and
// shrinks while the rate is below capacity, never below 0 (spare capacity is
// not banked); the lag is backlog / capacity, seconds.
type ReplicaLag struct {
	capacity, backlog float64
}

// NewReplicaLag returns a replica that is up to date, applying capacity
// messages/s.
func NewReplicaLag(capacity float64) *ReplicaLag { return &ReplicaLag{capacity: capacity} }

// Step advances the replica by dt seconds while the primary takes writes at
// u messages/s, and returns the lag at the end of it, seconds.
func (r *ReplicaLag) Step(u, dt float64) float64 {
	r.backlog = math.Max(0, r.backlog+(u-r.capacity)*dt)
	return r.Seconds()
}

// Backlog is the number of writes the replica has not applied yet.
func (r *ReplicaLag) Backlog() float64 { return r.backlog }

// Seconds is the replication lag, seconds.
func (r *ReplicaLag) Seconds() float64 { return r.backlog / r.capacity }

// lagMeter is a replica with its lag metric pipeline.
type lagMeter struct {
	lag  *ReplicaLag
	pipe *Pipeline
}

// newLagMeter returns an up-to-date replica whose metric shows 0 before
// the start. The lag metric has no noise.
func newLagMeter(r Replica) *lagMeter {
	return &lagMeter{lag: NewReplicaLag(r.Capacity), pipe: NewPipeline(r.MetricPeriod, r.MetricDelay, 0, nil, 0)}
}

// step advances the replica over [t, t+dt) at write rate u and records the
// lag at the end of the step in the metric; it returns that lag.
func (m *lagMeter) step(t, dt time.Duration, u float64) float64 {
	lag := m.lag.Step(u, dt.Seconds())
	m.pipe.Observe(t, dt, lag)
	return lag
}

// ReplicaLagScenario returns the replica-lag scenario (docs/lab.md): the reference
// plant and backlog, without its disturbance and setpoint change, and a
// replica that applies 1,000 messages/s while the primary's CPU is at its
// 70 % setpoint at 1,200: a loop on the CPU alone makes the lag grow by
// 0.2 s every second. The lag setpoint is 10 s with a band of 2 s; the lag
// is published like the CPU, 60 s averages 90 s late.
func ReplicaLagScenario() Scenario {
	s := Reference()
	s.SetpointChanges, s.Disturbances = nil, nil
	s.Replica = &Replica{Capacity: 1000, Setpoint: 10, Band: 2, MetricPeriod: time.Minute, MetricDelay: 90 * time.Second}
	return s
}
