// Package lab is the closed-loop comparison of the lab: identify the
// simulated plant by an open-loop step test, tune every feedback controller
// from the identified model, run each controller on the same scenario and
// measure it from the plant's true CPU.
package lab

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// The controllers that Compare knows.
const (
	Fixed    = "fixed"
	AIMD     = "aimd"
	PI       = "pi"
	PID      = "pid"
	PIAWSPFF = "pi-aw-spf-ff"
	Smith    = "smith"
)

// Controllers lists the controllers in the order of the report.
func Controllers() []string { return []string{Fixed, AIMD, PI, PID, PIAWSPFF, Cascade, Smith} }

// ParseControllers parses a comma-separated list of controller names.
func ParseControllers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(known(), p) {
			return nil, fmt.Errorf("unknown controller %q: want some of %s", p, strings.Join(known(), ","))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no controllers: want some of " + strings.Join(known(), ","))
	}
	return out, nil
}

// Identifier identifies a model from a step test and returns it with the
// fit's RMSE.
type Identifier func(d ident.Data) (control.FOPDT, float64, error)

// FitFOPDT is the default Identifier: pkg/ident's least-squares fit.
func FitFOPDT(d ident.Data) (control.FOPDT, float64, error) {
	r, err := ident.Fit(d)
	if err != nil {
		return control.FOPDT{}, 0, err
	}
	return r.Model, r.RMSE, nil
}

// Gains override the tuned gains when set (nil: tune from the model).
type Gains struct {
	Kp, Ki, Kd *float64
}

// Options configure Compare.
type Options struct {
	// Controllers to run; nil means DefaultControllers.
	Controllers []string
	// Identify identifies the model; nil means FitFOPDT.
	Identify Identifier
	// Gains override the tuned gains of the feedback controllers.
	Gains Gains
}

// Model is the identified model as the report shows it.
type Model struct {
	Gain      float64 `json:"gain"`
	TauS      float64 `json:"tau_s"`
	DeadTimeS float64 `json:"dead_time_s"`
	Base      float64 `json:"base"`
	RMSE      float64 `json:"rmse"`
	// NoiseSD is the standard deviation of the measurement before the step,
	// points: the noise that the delay-aware integrator must not amplify.
	NoiseSD float64 `json:"noise_sd"`
	// StepFrom and StepTo are the rates of the step test.
	StepFrom float64 `json:"step_from"`
	StepTo   float64 `json:"step_to"`
}

// ScenarioView is the scenario as the report shows it (seconds).
type ScenarioView struct {
	Gain          float64          `json:"gain"`
	Base          float64          `json:"base"`
	TauS          float64          `json:"tau_s"`
	DeadTimeS     float64          `json:"dead_time_s"`
	MetricPeriodS float64          `json:"metric_period_s"`
	MetricDelayS  float64          `json:"metric_delay_s"`
	TickS         float64          `json:"tick_s"`
	Setpoint      float64          `json:"setpoint"`
	SetpointChg   []map[string]any `json:"setpoint_changes"`
	Disturbances  []map[string]any `json:"disturbances"`
	ProducerRate  float64          `json:"producer_rate"`
	Backlog       int64            `json:"backlog"`
	ProducerChg   []map[string]any `json:"producer_changes,omitempty"`
	Bursts        []map[string]any `json:"bursts,omitempty"`
	MaxRate       float64          `json:"max_rate"`
	DurationS     float64          `json:"duration_s"`
	Noise         float64          `json:"noise"`
	Seed          uint64           `json:"seed"`
	PlantChanges  []string         `json:"plant_changes,omitempty"`
	Replica       *ReplicaView     `json:"replica,omitempty"`
}

// ReplicaView is the scenario's replica as the report shows it (seconds).
type ReplicaView struct {
	Capacity      float64 `json:"capacity"`
	LagSetpoint   float64 `json:"lag_setpoint_s"`
	LagBand       float64 `json:"lag_band_s"`
	MetricPeriodS float64 `json:"metric_period_s"`
	MetricDelayS  float64 `json:"metric_delay_s"`
}

func view(s sim.Scenario) ScenarioView {
	v := ScenarioView{
		Gain: s.Plant.Gain, Base: s.Plant.Base, TauS: s.Plant.Tau.Seconds(), DeadTimeS: s.Plant.DeadTime.Seconds(),
		MetricPeriodS: s.MetricPeriod.Seconds(), MetricDelayS: s.MetricDelay.Seconds(), TickS: s.Tick.Seconds(),
		Setpoint: s.Setpoint, ProducerRate: s.ProducerRate, Backlog: s.Backlog, MaxRate: s.MaxRate,
		DurationS: s.Duration.Seconds(), Noise: s.Noise, Seed: s.Seed,
		SetpointChg: []map[string]any{}, Disturbances: []map[string]any{},
	}
	for _, c := range s.SetpointChanges {
		v.SetpointChg = append(v.SetpointChg, map[string]any{"at_s": c.At.Seconds(), "value": c.Value})
	}
	for _, d := range s.Disturbances {
		v.Disturbances = append(v.Disturbances, map[string]any{"at_s": d.At.Seconds(), "duration_s": d.Duration.Seconds(), "size": d.Size})
	}
	for _, c := range s.PlantChanges {
		v.PlantChanges = append(v.PlantChanges, c.String())
	}
	for _, c := range s.ProducerChanges {
		v.ProducerChg = append(v.ProducerChg, map[string]any{"at_s": c.At.Seconds(), "rate": c.Rate})
	}
	for _, b := range s.Bursts {
		v.Bursts = append(v.Bursts, map[string]any{"at_s": b.At.Seconds(), "n": b.N})
	}
	if r := s.Replica; r != nil {
		v.Replica = &ReplicaView{Capacity: r.Capacity, LagSetpoint: r.Setpoint, LagBand: r.Band,
			MetricPeriodS: r.MetricPeriod.Seconds(), MetricDelayS: r.MetricDelay.Seconds()}
	}
	return v
}

// Result is one controller's line of the report.
type Result struct {
	Controller string  `json:"controller"`
	IAE        float64 `json:"iae"`
	IAERatio   float64 `json:"iae_ratio"`
	// IAEFloorRatio is the IAE over the report's iae_floor.
	IAEFloorRatio    float64      `json:"iae_floor_ratio"`
	StartOvershootPP float64      `json:"start_overshoot_pp"`
	ViolationS       float64      `json:"violation_s"`
	SettlingS        sim.Settling `json:"settling_s"`
	Processed        int64        `json:"processed"`
	Lost             int64        `json:"lost"`
	MaxCPU           float64      `json:"max_cpu"`
	// Events is the IAE between each event and the next, beside the
	// event's floor.
	Events []sim.EventIAE `json:"events"`
	// PlantChanges is the response to each plant change (robustness).
	PlantChanges []sim.ChangeResponse `json:"plant_changes,omitempty"`
	// Signals are the measures of each plant output: the CPU and, with a
	// replica, the lag.
	Signals []sim.SignalMetrics `json:"signals"`
	// LimitingSwitches counts the changes of the signal that set the rate
	// (0 for a loop on one signal).
	LimitingSwitches int `json:"limiting_switches"`
	// Tuning is the controller's parameters (not part of the JSON contract's
	// required keys; informative).
	Tuning map[string]float64 `json:"tuning,omitempty"`
	// Series is the run's time series, for plots; not printed.
	Series sim.Series `json:"-"`
}

// Report is the comparison: the JSON contract of `sluice lab compare`.
type Report struct {
	Scenario      ScenarioView `json:"scenario"`
	Model         Model        `json:"model"`
	LoopDeadTimeS float64      `json:"loop_dead_time_s"`
	IAEBound      float64      `json:"iae_bound"`
	// IAEFloor is the tight floor: known events charged the plant's dead
	// time and lag, unmeasured disturbances the loop's (sim.EventFloor).
	IAEFloor float64 `json:"iae_floor"`
	// ReplicaModel is the replica's step test, with a replica.
	ReplicaModel *ReplicaModel `json:"replica_model,omitempty"`
	Results      []Result      `json:"results"`
}

// StepSample is the sampling period of the identification step test.
const StepSample = time.Second

// Identify runs an open-loop step test on the scenario's plant and
// identifies a model from it. The step goes from 0 to half the max rate,
// halved while the CPU saturates (an operator would do the same). The true
// plant parameters are never read.
func Identify(s sim.Scenario, id Identifier) (control.FOPDT, Model, error) {
	if id == nil {
		id = FitFOPDT
	}
	to := s.MaxRate / 2
	// The step test samples the plant's CPU every second, like `sluice lab
	// step`: it identifies the plant; the metric pipeline's delay is known
	// configuration that tuning adds.
	fine := s
	fine.MetricPeriod, fine.MetricDelay, fine.Step = StepSample, 0, min(StepSample, time.Second)
	fine.Tick = max(fine.Tick, fine.Step)
	var lastErr error
	for range 8 {
		st := sim.StepTest{From: 0, To: to, At: 5 * time.Minute, Duration: 20 * time.Minute}
		d, err := sim.RunStepTest(fine, st)
		if err != nil {
			return control.FOPDT{}, Model{}, fmt.Errorf("step test: %w", err)
		}
		if slices.Max(d.Y) >= 99 {
			to /= 2
			lastErr = fmt.Errorf("the CPU saturates at a step to %.4g messages/s", to*2)
			continue
		}
		m, rmse, err := id(d)
		if err != nil {
			return control.FOPDT{}, Model{}, fmt.Errorf("identify: %w", err)
		}
		return m, Model{Gain: m.Gain, TauS: m.Tau.Seconds(), DeadTimeS: m.DeadTime.Seconds(), Base: m.Base, RMSE: rmse,
			NoiseSD: baselineNoise(d), StepFrom: 0, StepTo: to}, nil
	}
	return control.FOPDT{}, Model{}, fmt.Errorf("step test: %w", lastErr)
}

// baselineNoise is the sample standard deviation of the output before the
// input steps.
func baselineNoise(d ident.Data) float64 {
	n := 0
	for n < d.Len() && d.U[n] == d.U[0] {
		n++
	}
	if n < 3 {
		return 0
	}
	mean := 0.0
	for _, y := range d.Y[:n] {
		mean += y
	}
	mean /= float64(n)
	ss := 0.0
	for _, y := range d.Y[:n] {
		ss += (y - mean) * (y - mean)
	}
	return math.Sqrt(ss / float64(n-1))
}

// Compare identifies the plant, tunes and runs the controllers.
func Compare(s sim.Scenario, opt Options) (Report, error) {
	if err := s.Validate(); err != nil {
		return Report{}, fmt.Errorf("scenario: %w", err)
	}
	names := opt.Controllers
	if names == nil {
		names = DefaultControllers(s)
	}
	model, mv, err := Identify(s, opt.Identify)
	if err != nil {
		return Report{}, err
	}
	rep := Report{
		Scenario:      view(s),
		Model:         mv,
		LoopDeadTimeS: s.LoopDeadTime(s.Plant.DeadTime).Seconds(),
		IAEBound:      s.IAEBound(),
		IAEFloor:      s.IAEFloor(),
	}
	plant := IdentifiedPlant(model, mv)
	if s.Replica != nil {
		rm, err := IdentifyReplica(s)
		if err != nil {
			return Report{}, err
		}
		rep.ReplicaModel, plant.Replica = &rm, rm
	}
	for _, name := range names {
		p, tun, err := NewPolicy(name, s, plant, opt.Gains)
		if err != nil {
			return Report{}, err
		}
		r, err := sim.Run(s, p)
		if err != nil {
			return Report{}, fmt.Errorf("run %s: %w", name, err)
		}
		m := r.Metrics
		rep.Results = append(rep.Results, Result{
			Controller: name, IAE: m.IAE, IAERatio: ratio(m.IAE, rep.IAEBound), IAEFloorRatio: ratio(m.IAE, rep.IAEFloor),
			StartOvershootPP: m.StartOvershoot, ViolationS: m.ViolationSeconds, SettlingS: m.Settling,
			Processed: m.Processed, Lost: m.Lost, MaxCPU: m.MaxCPU, Tuning: tun, Series: r.Series,
			Events: sim.IAEByEvent(s, r.Series), PlantChanges: sim.PlantChangeResponses(s, r.Series),
			Signals: sim.SignalMeasures(s, r.Series), LimitingSwitches: sim.LimitingSwitches(r.Series),
		})
	}
	return rep, nil
}

// ratio is iae over a bound or floor; 0 when there is no event to bound.
func ratio(iae, bound float64) float64 {
	if bound <= 0 {
		return 0
	}
	return iae / bound
}
