package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// The latency models of Latency.Mode.
const (
	// LatencyQueueing is a destination that queues: the time per message
	// is Service / (1 - utilization), utilization being the CPU (M/M/1).
	LatencyQueueing = "queueing"
	// LatencyFlat is a destination whose latency does not respond to
	// load (an HTTP service behind a queue of its own): Service always.
	LatencyFlat = "flat"
	// LatencyExternal queues on the outside load only (the base load plus
	// the disturbances), not on the consumers': a latency that moves, but
	// not with what the consumers send.
	LatencyExternal = "external"
)

// LatencyModes lists the latency models.
func LatencyModes() []string { return []string{LatencyQueueing, LatencyFlat, LatencyExternal} }

// Latency is the per-message store time that the consumers see at the
// destination: the fast signal of the consumers' inner loop.
type Latency struct {
	// Mode is the model: queueing (default), flat or external.
	Mode string `json:"mode"`
	// Service is the time per message of an idle destination.
	Service time.Duration `json:"service"`
	// Noise is the standard deviation of the log of each step's latency
	// (0.05: about 5 % from step to step).
	Noise float64 `json:"noise"`
}

// maxUtilization bounds the utilization in the queueing model, so that the
// latency at 100 % CPU is 100 x Service, not infinite.
const maxUtilization = 0.99

// DefaultLatency is the reference plant's: 2 ms per message idle, queueing,
// 5 % noise.
func DefaultLatency() *Latency {
	return &Latency{Mode: LatencyQueueing, Service: 2 * time.Millisecond, Noise: 0.05}
}

func (l Latency) validate() error {
	switch {
	case l.Mode != LatencyQueueing && l.Mode != LatencyFlat && l.Mode != LatencyExternal:
		return fmt.Errorf("latency mode %q: want one of %v", l.Mode, LatencyModes())
	case l.Service <= 0 || l.Service > time.Minute:
		return fmt.Errorf("latency service time %v: must be positive and at most 1m", l.Service)
	case math.IsNaN(l.Noise) || l.Noise < 0 || l.Noise > 2:
		return fmt.Errorf("latency noise %v: must be in [0, 2]", l.Noise)
	}
	return nil
}

// LatencyMeter draws the latency per message of each step, with its own
// random stream (the metric noise of a run stays what it was without it).
type LatencyMeter struct {
	l   Latency
	rng *rand.Rand
}

// NewLatencyMeter returns a meter of latency l seeded with seed.
func NewLatencyMeter(l Latency, seed uint64) *LatencyMeter {
	return &LatencyMeter{l: l, rng: rand.New(rand.NewPCG(seed, 0x1a7e))}
}

// At is the latency per message, seconds, at true CPU cpu with outside
// load outside (base load plus disturbances), points, with noise.
func (m *LatencyMeter) At(cpu, outside float64) float64 {
	x := m.l.Mean(cpu, outside)
	if m.l.Noise > 0 {
		x *= math.Exp(m.l.Noise * m.rng.NormFloat64())
	}
	return x
}

// Mean is the latency per message without noise, seconds, at true CPU cpu
// with outside load outside, points.
func (l Latency) Mean(cpu, outside float64) float64 {
	u := 0.0
	switch l.Mode {
	case LatencyQueueing:
		u = cpu / 100
	case LatencyExternal:
		u = outside / 100
	}
	u = math.Max(0, math.Min(maxUtilization, u))
	return l.Service.Seconds() / (1 - u)
}

// pace is the rate the consumers take at in the step from t: the allowed
// rate, or what the policy's inner loop lets through of it, which counts as
// withheld while the queue holds more than the pace takes.
func (r *loopRun) pace(t time.Duration) float64 {
	if r.inner == nil {
		return r.allowed
	}
	done := r.cons.inFlight
	p := math.Max(0, math.Min(r.allowed, r.inner.Pace(t, r.allowed, r.latency, done)))
	if math.IsNaN(p) {
		p = r.allowed
	}
	if float64(r.q.length) > p*r.hs {
		r.withheldTick += math.Min(r.allowed-p, float64(r.q.length)/r.hs-p) * r.hs
	}
	return p
}

// observeLatency draws the latency of the batch the destination completed in
// the step from t, at the step's CPU, and records it with the pace.
func (r *loopRun) observeLatency(t time.Duration, cpu float64, done int64, pace float64) {
	if r.lat == nil {
		return
	}
	r.latency = math.NaN()
	if done > 0 {
		r.latency = r.lat.At(cpu, r.s.Plant.Base+r.s.DisturbanceAt(t))
	}
	r.ser.Latency = append(r.ser.Latency, r.latency*1000)
	if r.inner != nil {
		r.ser.Paced = append(r.ser.Paced, pace)
	}
}
