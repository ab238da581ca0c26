package sim

import (
	"math"
	"time"
)

// EventFloor is the least error an event can cost any controller, in
// point-seconds (docs/lab.md): an event the controller knows of when it
// happens (the start, a setpoint edit) costs at least |step| x (plant dead
// time + lag), since even a perfect feedforward moves the CPU only through
// the plant; an unmeasured disturbance costs at least |step| x (loop dead
// time + lag), since the controller learns of it only through the metric
// pipeline. A plant change costs nothing here: its size is not a step of
// the load or of the setpoint. The plant is the one in force at the start.
func (s Scenario) EventFloor(e Event) float64 {
	lag := s.Plant.Tau
	switch e.Kind {
	case "start", "setpoint":
		return e.Size * (s.Plant.DeadTime + lag).Seconds()
	case "disturbance", "disturbance-end":
		return e.Size * (s.LoopDeadTime(s.Plant.DeadTime) + lag).Seconds()
	}
	return 0
}

// IAEFloor is the sum of EventFloor over the scenario's events: the tight
// floor beside IAEBound (8,400 point-s on the reference scenario against
// iae_bound's 18,600).
func (s Scenario) IAEFloor() float64 {
	sum := 0.0
	for _, e := range s.Events() {
		sum += s.EventFloor(e)
	}
	return sum
}

// EventIAE is the error of a run between one event and the next, beside
// that event's floor.
type EventIAE struct {
	Kind  string  `json:"kind"`
	AtS   float64 `json:"at_s"`
	IAE   float64 `json:"iae"`
	Floor float64 `json:"floor"`
	// ViolationS is the time the CPU spent above setpoint +
	// ViolationMargin in the window.
	ViolationS float64 `json:"violation_s"`
}

// IAEByEvent splits the IAE of series ser into the windows between the
// scenario's events, from the plant's true CPU.
func IAEByEvent(s Scenario, ser Series) []EventIAE {
	ev := s.Events()
	out := make([]EventIAE, len(ev))
	for i, e := range ev {
		out[i] = EventIAE{Kind: e.Kind, AtS: e.At.Seconds(), Floor: s.EventFloor(e)}
	}
	h := s.step().Seconds()
	j := 0
	for i, t := range ser.T {
		start := time.Duration((t - h) * float64(time.Second))
		for j+1 < len(ev) && start >= ev[j+1].At {
			j++
		}
		if len(out) > 0 {
			out[j].IAE += math.Abs(ser.CPU[i]-ser.Setpoint[i]) * h
			if ser.CPU[i]-ser.Setpoint[i] > ViolationMargin {
				out[j].ViolationS += h
			}
		}
	}
	return out
}
