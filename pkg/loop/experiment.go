package loop

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// AttrExperiment is the PARAMS attribute that asks the loop for a guarded
// experiment (Experiment; ParseExperiment gives its text form).
const AttrExperiment = "experiment"

// MaxExperimentStep is the largest setpoint step an experiment may take,
// points.
const MaxExperimentStep = 20

// Experiment is a guarded experiment an operator asks of a running loop
// (`sluice tune --experiment`, the dashboard's button): for at most
// MaxDuration the setpoint is offset by Step, the rate moves at most
// MaxRateStep from where it was, and the first fresh datapoint at or above
// AbortAbove aborts it at once, bumplessly. The loop's bounds, slew limit
// and stale policy stay in force; a stale metric ends it too. An experiment
// runs once per ID; its progress is in STATE (ExperimentState).
type Experiment struct {
	ID          string        `json:"id"`
	Step        float64       `json:"step"`
	AbortAbove  float64       `json:"abort_above"`
	MaxDuration time.Duration `json:"max_duration"`
	// MaxRateStep bounds |rate − the rate before the experiment|,
	// messages/s (0: only the loop's bounds).
	MaxRateStep float64 `json:"max_rate_step,omitempty"`
}

// String is the attribute's text form, as ParseExperiment reads it.
func (e Experiment) String() string {
	s := fmt.Sprintf("id=%s,step=%g,abort_above=%g,max_duration=%v", e.ID, e.Step, e.AbortAbove, e.MaxDuration)
	if e.MaxRateStep > 0 {
		s += fmt.Sprintf(",max_rate_step=%g", e.MaxRateStep)
	}
	return s
}

// ParseExperiment reads the attribute's text form:
// `id=ID,step=POINTS,abort_above=LEVEL,max_duration=DURATION[,max_rate_step=RATE]`.
// An experiment is a setpoint step; kind=setpoint-step, which items written
// when it had to be named may hold, is read and says nothing more.
func ParseExperiment(text string) (Experiment, error) {
	var e Experiment
	for _, kv := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return e, fmt.Errorf("%q: want name=value", kv)
		}
		var err error
		switch k {
		case "id":
			e.ID = v
		case "kind":
			if v != "setpoint-step" {
				return e, fmt.Errorf("kind %q: an experiment is a setpoint step; leave kind out (or kind=setpoint-step)", v)
			}
		case "step":
			e.Step, err = strconv.ParseFloat(v, 64)
		case "abort_above":
			e.AbortAbove, err = strconv.ParseFloat(v, 64)
		case "max_rate_step":
			e.MaxRateStep, err = strconv.ParseFloat(v, 64)
		case "max_duration":
			e.MaxDuration, err = time.ParseDuration(v)
		default:
			return e, fmt.Errorf("%q: unknown field (id, kind, step, abort_above, max_duration, max_rate_step)", k)
		}
		if err != nil {
			return e, fmt.Errorf("%s: %w", k, err)
		}
	}
	return e, e.validate()
}

func (e Experiment) validate() error {
	switch {
	case e.ID == "":
		return fmt.Errorf("id is required (an experiment runs once per id)")
	case !finite(e.Step) || e.Step == 0 || math.Abs(e.Step) > MaxExperimentStep:
		return fmt.Errorf("step %v: want a non-zero number of points, at most %d either way", e.Step, MaxExperimentStep)
	case !finite(e.AbortAbove):
		return fmt.Errorf("abort_above %v: want the signal's ceiling", e.AbortAbove)
	case e.MaxDuration <= 0 || e.MaxDuration > 24*time.Hour:
		return fmt.Errorf("max_duration %v: want a positive duration, at most 24h", e.MaxDuration)
	case !finite(e.MaxRateStep) || e.MaxRateStep < 0:
		return fmt.Errorf("max_rate_step %v: want a rate >= 0", e.MaxRateStep)
	}
	return nil
}

// checkExperiment refuses an experiment that cannot run on p.
func (p Params) checkExperiment(fail failFunc) {
	e := p.Experiment
	switch {
	case e == nil:
	case p.Mode == ModeManual:
		fail(AttrExperiment, "an experiment runs on a loop in auto or shadow mode, not manual")
	case len(p.Signals) > 0 || len(p.Nodes) > 0:
		fail(AttrExperiment, "an experiment runs on a loop with one signal and one node")
	case e.AbortAbove <= p.Setpoint+math.Max(e.Step, 0):
		fail(AttrExperiment, "abort_above %g must lie above the experiment's setpoint %g", e.AbortAbove, p.Setpoint+e.Step)
	}
}

// experimentCodec reads and writes the attribute's text form.
var experimentCodec = codec{
	decode: func(d *decoder, p *Params, name string) {
		text := d.str(name, "")
		if text == "" || d.failed(name) {
			return
		}
		e, err := ParseExperiment(text)
		if err != nil {
			d.fail(name, "%v", err)
			return
		}
		p.Experiment = &e
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Experiment != nil {
			a[name] = p.Experiment.String()
		}
	},
}

// Experiment statuses in ExperimentState.
const (
	ExperimentRunning = "running"
	ExperimentDone    = "done"
	ExperimentAborted = "aborted"
)

// ExperimentState is an experiment's progress in STATE.
type ExperimentState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Reason says why it ended (the datapoint at the ceiling, a stale
	// metric, its duration).
	Reason    string    `json:"reason,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Setpoint and Rate are the setpoint and the rate before it.
	Setpoint float64 `json:"setpoint"`
	Rate     float64 `json:"rate"`
}

// experimentStep is what the experiment does at this tick.
type experimentStep int

const (
	expIdle experimentStep = iota
	expRunning
	expAbort
)

// experiment advances the loop's experiment at this tick: it starts one
// with a new ID, ends it after its duration or on a stale metric, aborts it
// on a fresh datapoint at or above its ceiling, and while it runs offsets
// the controller's setpoint.
func experiment(st *State, p Params, in *control.Input, fresh bool, now time.Time) experimentStep {
	e := p.Experiment
	x := st.Experiment
	if e == nil || (x != nil && x.ID == e.ID && x.Status != ExperimentRunning) {
		return expIdle
	}
	if x == nil || x.ID != e.ID {
		x = &ExperimentState{ID: e.ID, Status: ExperimentRunning, StartedAt: now, Setpoint: p.Setpoint, Rate: st.Rate}
	} else {
		c := *x
		x = &c
	}
	st.Experiment = x
	end := func(status, reason string) {
		x.Status, x.Reason, x.EndedAt = status, reason, now
	}
	switch {
	case fresh && in.Measurement >= e.AbortAbove:
		end(ExperimentAborted, fmt.Sprintf("datapoint %.4g at or above the ceiling %g", in.Measurement, e.AbortAbove))
		return expAbort
	case !fresh:
		end(ExperimentAborted, "the metric is stale: the stale policy holds the loop")
		return expIdle
	case now.Sub(x.StartedAt) >= e.MaxDuration:
		end(ExperimentDone, fmt.Sprintf("ran its %v", e.MaxDuration))
		return expIdle
	}
	in.Setpoint += e.Step
	return expRunning
}

// updateExperiment runs the controller for a loop whose experiment runs or
// aborts (experiment's step s): while it runs, the rate stays within
// MaxRateStep of the rate before it; an abort goes back to that rate at
// once (never above the rate now), the controller tracking it so that the
// next ticks continue from there.
func updateExperiment(ctrl *control.Controller, st *State, p Params, in control.Input, s experimentStep) control.Output {
	x, e := st.Experiment, p.Experiment
	if s == expAbort {
		ctrl.Config.Mode = control.ModeManual
		ctrl.Config.ManualRate = math.Min(x.Rate, math.Max(st.Rate, ctrl.Config.Min))
		ctrl.Config.Slew = 0
		return ctrl.Update(in)
	}
	out := ctrl.Update(in)
	if e.MaxRateStep > 0 {
		if r := math.Max(x.Rate-e.MaxRateStep, math.Min(x.Rate+e.MaxRateStep, out.Rate)); r != out.Rate {
			ctrl.Override(r)
			out.Rate, out.Saturated = ctrl.State.Output, true
		}
	}
	return out
}

// offset is the setpoint offset of a running experiment (0 otherwise): the
// tick records the setpoint in force.
func (x *ExperimentState) offset(p Params) float64 {
	if x == nil || x.Status != ExperimentRunning || p.Experiment == nil || p.Experiment.ID != x.ID {
		return 0
	}
	return p.Experiment.Step
}
