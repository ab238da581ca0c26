// Package sim is the simulated plant of the lab: a destination whose CPU
// follows the processed rate through a first-order lag and a dead time, a
// CloudWatch-like metric pipeline that publishes period averages after a
// delay, producers, a queue and consumers whose messages are all counted.
// A run is deterministic for a seed.
package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// SetpointChange moves the setpoint to Value at At.
type SetpointChange struct {
	At    time.Duration `json:"at"`
	Value float64       `json:"value"`
}

// Disturbance adds Size points of CPU from outside (another tenant, a batch
// job) from At for Duration.
type Disturbance struct {
	At       time.Duration `json:"at"`
	Duration time.Duration `json:"duration"`
	Size     float64       `json:"size"`
}

// Scenario is everything a closed-loop or step-test run depends on.
type Scenario struct {
	// Plant is the true plant: gain (points of CPU per message/s), base load
	// (percent), lag and dead time.
	Plant control.FOPDT `json:"plant"`
	// MetricPeriod is the averaging period of a datapoint; MetricDelay is
	// how long after its period ends a datapoint is published.
	MetricPeriod time.Duration `json:"metric_period"`
	MetricDelay  time.Duration `json:"metric_delay"`
	// Tick is the controller period.
	Tick time.Duration `json:"tick"`
	// Setpoint is the CPU setpoint at the start, percent.
	Setpoint float64 `json:"setpoint"`
	// SetpointChanges and Disturbances are the scenario's events.
	SetpointChanges []SetpointChange `json:"setpoint_changes"`
	Disturbances    []Disturbance    `json:"disturbances"`
	// ProducerRate is the producers' rate, messages/s; Backlog the number
	// of messages queued at the start.
	ProducerRate float64 `json:"producer_rate"`
	Backlog      int64   `json:"backlog"`
	// PlantChanges change the true plant during the run without telling
	// the controller (plantchange.go).
	PlantChanges []PlantChange `json:"plant_changes,omitempty"`
	// ProducerChanges change the producers' rate during the run; Bursts
	// enqueue many messages at once (traffic.go).
	ProducerChanges []ProducerChange `json:"producer_changes,omitempty"`
	Bursts          []Burst          `json:"bursts,omitempty"`
	// MaxRate is the largest rate a controller may allow, messages/s.
	MaxRate float64 `json:"max_rate"`
	// Duration is the length of the run.
	Duration time.Duration `json:"duration"`
	// Noise is the standard deviation of the measurement noise on each
	// published datapoint, points of CPU.
	Noise float64 `json:"noise"`
	// Seed seeds the noise.
	Seed uint64 `json:"seed"`
	// Step is the integration step of the plant; zero means 1 s.
	Step time.Duration `json:"step,omitempty"`
	// Replica, when set, adds a replica whose replication lag is the
	// plant's second output (replica.go).
	Replica *Replica `json:"replica,omitempty"`
	// Latency, when set, is the store time per message that the consumers
	// see (latency.go); a policy that is an InnerPolicy paces on it.
	Latency *Latency `json:"latency,omitempty"`
}

// Reference returns the reference scenario (docs/lab.md).
func Reference() Scenario {
	return Scenario{
		Plant:           control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second},
		MetricPeriod:    60 * time.Second,
		MetricDelay:     90 * time.Second,
		Tick:            60 * time.Second,
		Setpoint:        70,
		SetpointChanges: []SetpointChange{{At: 120 * time.Minute, Value: 50}},
		Disturbances:    []Disturbance{{At: 60 * time.Minute, Duration: 40 * time.Minute, Size: 20}},
		ProducerRate:    1500,
		Backlog:         1_000_000,
		MaxRate:         3000,
		Duration:        180 * time.Minute,
		Noise:           0,
		Seed:            1,
		Latency:         DefaultLatency(),
	}
}

func (s Scenario) step() time.Duration {
	if s.Step > 0 {
		return s.Step
	}
	return time.Second
}

// Validate reports whether s can be simulated, with a message that says
// what is wrong.
func (s Scenario) Validate() error {
	if err := s.Plant.Validate(); err != nil {
		return fmt.Errorf("plant: %w", err)
	}
	fin := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case s.Plant.Base < 0 || s.Plant.Base >= 100:
		return fmt.Errorf("base load %v: must be in [0, 100)", s.Plant.Base)
	case s.MetricPeriod <= 0:
		return fmt.Errorf("metric period %v: must be positive", s.MetricPeriod)
	case s.MetricDelay < 0:
		return fmt.Errorf("metric delay %v: must not be negative", s.MetricDelay)
	case s.Tick <= 0:
		return fmt.Errorf("tick %v: must be positive", s.Tick)
	case s.Step < 0 || s.Step > s.Tick || s.Step > s.MetricPeriod:
		return fmt.Errorf("integration step %v: must be positive and at most the tick and the metric period", s.Step)
	case !fin(s.Setpoint) || s.Setpoint <= 0 || s.Setpoint > 100:
		return fmt.Errorf("setpoint %v: must be in (0, 100]", s.Setpoint)
	case !fin(s.ProducerRate) || s.ProducerRate < 0:
		return fmt.Errorf("producer rate %v: must be a finite number >= 0", s.ProducerRate)
	case s.Backlog < 0:
		return fmt.Errorf("backlog %d: must not be negative", s.Backlog)
	case !fin(s.MaxRate) || s.MaxRate <= 0:
		return fmt.Errorf("max rate %v: must be positive", s.MaxRate)
	case s.Duration <= 0:
		return fmt.Errorf("duration %v: must be positive", s.Duration)
	case s.Duration > 48*time.Hour:
		return fmt.Errorf("duration %v: at most 48h", s.Duration)
	case s.Duration/s.step() > 200_000:
		return fmt.Errorf("duration %v with step %v: too many steps (at most 200000)", s.Duration, s.step())
	case s.MetricPeriod%s.step() != 0 || s.Tick%s.step() != 0:
		return fmt.Errorf("metric period %v and tick %v: must be multiples of the integration step %v", s.MetricPeriod, s.Tick, s.step())
	case s.MetricDelay > 24*time.Hour || s.MetricPeriod > 24*time.Hour || s.Tick > 24*time.Hour:
		return fmt.Errorf("metric period %v, metric delay %v, tick %v: at most 24h each", s.MetricPeriod, s.MetricDelay, s.Tick)
	case s.ProducerRate > 1e9 || s.MaxRate > 1e9:
		return fmt.Errorf("producer rate %v, max rate %v: at most 1e9 messages/s", s.ProducerRate, s.MaxRate)
	case !fin(s.Noise) || s.Noise < 0:
		return fmt.Errorf("noise %v: must be a finite number >= 0", s.Noise)
	}
	if err := s.validatePlantChanges(); err != nil {
		return err
	}
	if err := s.validateTraffic(); err != nil {
		return err
	}
	if s.Replica != nil {
		if err := s.Replica.validate(s.step()); err != nil {
			return err
		}
	}
	if s.Latency != nil {
		if err := s.Latency.validate(); err != nil {
			return err
		}
	}
	for _, c := range s.SetpointChanges {
		if c.At < 0 || !fin(c.Value) || c.Value <= 0 || c.Value > 100 {
			return fmt.Errorf("setpoint change %v=%v: time must be >= 0 and value in (0, 100]", c.At, c.Value)
		}
	}
	for _, d := range s.Disturbances {
		if d.At < 0 || d.Duration <= 0 || !fin(d.Size) || math.Abs(d.Size) > 100 {
			return fmt.Errorf("disturbance %v+%v=%v: time must be >= 0, duration positive, size within +-100", d.At, d.Duration, d.Size)
		}
	}
	return nil
}

// SetpointAt returns the setpoint in force at t.
func (s Scenario) SetpointAt(t time.Duration) float64 {
	return inForce(s.Setpoint, s.SetpointChanges, t, func(c SetpointChange) (time.Duration, float64) { return c.At, c.Value })
}

// inForce returns the value in force at t: initial, or the value of the
// latest of changes at or before t (the last listed of those at the same
// time). change gives a change's time and value.
func inForce[C any](initial float64, changes []C, t time.Duration, change func(C) (time.Duration, float64)) float64 {
	v, last := initial, time.Duration(-1)
	for _, c := range changes {
		if at, x := change(c); at <= t && at >= last {
			v, last = x, at
		}
	}
	return v
}

// DisturbanceAt returns the CPU added from outside at t.
func (s Scenario) DisturbanceAt(t time.Duration) float64 {
	d := 0.0
	for _, x := range s.Disturbances {
		if t >= x.At && t < x.At+x.Duration {
			d += x.Size
		}
	}
	return d
}

// PipelineDelay is the loop dead time that the measurement and sampling add
// to the plant's: metric period / 2 + publication delay + tick / 2.
func (s Scenario) PipelineDelay() time.Duration {
	return s.MetricPeriod/2 + s.MetricDelay + s.Tick/2
}

// LoopDeadTime is the loop dead time (docs/architecture.md) for a plant with the given
// dead time: plant dead time + metric period / 2 + publication delay + tick / 2.
func (s Scenario) LoopDeadTime(plantDeadTime time.Duration) time.Duration {
	return plantDeadTime + s.PipelineDelay()
}

// Event is a moment at which the setpoint or the load steps.
type Event struct {
	Kind string        `json:"kind"` // start, disturbance, disturbance-end, setpoint, plant-change
	At   time.Duration `json:"at"`
	Size float64       `json:"size"` // step size, points (absolute value)
}

// Events lists the scenario's events in time order: the start (step =
// setpoint - base load), each disturbance's start and end, each setpoint
// change, each plant change (size 0: the load and the setpoint do not step,
// the plant does).
func (s Scenario) Events() []Event {
	ev := []Event{{Kind: "start", At: 0, Size: math.Abs(s.Setpoint - s.Plant.Base)}}
	for _, d := range s.Disturbances {
		ev = append(ev, Event{Kind: "disturbance", At: d.At, Size: math.Abs(d.Size)})
		ev = append(ev, Event{Kind: "disturbance-end", At: d.At + d.Duration, Size: math.Abs(d.Size)})
	}
	for _, c := range s.SetpointChanges {
		prev := s.SetpointAt(c.At - 1)
		if c.At == 0 {
			prev = s.Setpoint
		}
		ev = append(ev, Event{Kind: "setpoint", At: c.At, Size: math.Abs(c.Value - prev)})
	}
	for _, c := range s.PlantChanges {
		ev = append(ev, Event{Kind: EventPlantChange, At: c.At})
	}
	slices.SortStableFunc(ev, func(a, b Event) int { return int(a.At - b.At) })
	var out []Event
	for _, e := range ev {
		if e.At < s.Duration {
			out = append(out, e)
		}
	}
	return out
}

// eventEnd is when the i-th of the scenario's events ev ends: at the next
// event, else at the end of the run.
func (s Scenario) eventEnd(ev []Event, i int) time.Duration {
	if i+1 < len(ev) {
		return ev[i+1].At
	}
	return s.Duration
}

// IAEBound is the error a perfect controller cannot avoid (docs/architecture.md): the
// sum over events of |step size| x loop dead time, in point-seconds, for the
// true plant's dead time.
func (s Scenario) IAEBound() float64 {
	l := s.LoopDeadTime(s.Plant.DeadTime).Seconds()
	sum := 0.0
	for _, e := range s.Events() {
		sum += e.Size * l
	}
	return sum
}
