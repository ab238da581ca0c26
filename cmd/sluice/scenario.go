package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// scenarioFlags are the scenario flags shared by `lab step`, `lab compare`
// and `demo`. Their defaults are the reference scenario (docs/lab.md).
type scenarioFlags struct {
	fs        *flag.FlagSet
	s         sim.Scenario
	tau, dead time.Duration
	preset    string
	replica   sim.Replica // the replica flags; used when one is set or the preset has a replica
	latency   latencyFlags
}

// addScenarioFlags registers the scenario flags on fs. Call Scenario after
// fs.Parse for the validated scenario.
func addScenarioFlags(fs *flag.FlagSet) *scenarioFlags {
	f := &scenarioFlags{fs: fs, s: sim.Reference()}
	f.tau, f.dead = f.s.Plant.Tau, f.s.Plant.DeadTime
	s := &f.s
	fs.StringVar(&f.preset, "scenario", "", "named scenario whose values the other flags override: "+strings.Join(sim.Presets(), ", ")+" (default: the reference scenario)")
	fs.Float64Var(&s.Plant.Gain, "gain", s.Plant.Gain, "plant gain, points of CPU per message/s")
	fs.Float64Var(&s.Plant.Base, "base", s.Plant.Base, "base load, percent CPU")
	fs.DurationVar(&f.tau, "tau", f.tau, "plant time constant")
	fs.DurationVar(&f.dead, "dead-time", f.dead, "plant dead time")
	fs.DurationVar(&s.MetricPeriod, "metric-period", s.MetricPeriod, "metric averaging period")
	fs.DurationVar(&s.MetricDelay, "metric-delay", s.MetricDelay, "metric publication delay after the period ends")
	fs.DurationVar(&s.Tick, "tick", s.Tick, "controller tick")
	fs.Float64Var(&s.Setpoint, "setpoint", s.Setpoint, "CPU setpoint at the start, percent")
	fs.Var(newSetpointChangesFlag(&s.SetpointChanges), "setpoint-change",
		"setpoint change AT=VALUE, e.g. 120m=50 (repeatable or comma-separated; 'none' for no change)")
	fs.Var(newDisturbancesFlag(&s.Disturbances), "disturbance",
		"outside load AT+DURATION=SIZE in points, e.g. 60m+40m=20 (repeatable or comma-separated; 'none' for none)")
	fs.Float64Var(&s.ProducerRate, "producer-rate", s.ProducerRate, "producers' rate, messages/s")
	fs.Int64Var(&s.Backlog, "backlog", s.Backlog, "messages queued at the start")
	fs.Var(newPlantChangesFlag(&s.PlantChanges), "plant-change",
		"the true plant changes at AT, the controller is not told: AT=gain=G[,tau=T][,dead-time=D],\ne.g. 30m=gain=0.1 (repeatable or comma-separated; 'none' for none)")
	fs.Var(newProducerChangesFlag(&s.ProducerChanges), "producer-change",
		"producers' rate from AT, AT=RATE in messages/s, e.g. 30m=400 (repeatable or comma-separated; 'none' for none)")
	fs.Var(newBurstsFlag(&s.Bursts), "burst",
		"N messages enqueued at once at AT, AT=N, e.g. 60m=300000 (repeatable or comma-separated; 'none' for none)")
	fs.Float64Var(&s.MaxRate, "max-rate", s.MaxRate, "largest allowed rate, messages/s")
	fs.DurationVar(&s.Duration, "duration", s.Duration, "length of the run")
	fs.Float64Var(&s.Noise, "noise", s.Noise, "measurement noise, standard deviation in points of CPU")
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "seed of the noise")
	f.replica = *sim.ReplicaLagScenario().Replica
	r := &f.replica
	fs.Float64Var(&r.Capacity, "replica-capacity", r.Capacity, "a replica that applies this many messages/s (adds one to a scenario without; the lag is the second signal)")
	fs.Float64Var(&r.Setpoint, "lag-setpoint", r.Setpoint, "replication lag setpoint, seconds")
	fs.Float64Var(&r.Band, "lag-band", r.Band, "band above the lag setpoint that counts as held, seconds")
	fs.DurationVar(&r.MetricPeriod, "lag-metric-period", r.MetricPeriod, "lag metric averaging period")
	fs.DurationVar(&r.MetricDelay, "lag-metric-delay", r.MetricDelay, "lag metric publication delay after the period ends")
	f.latency.add(fs)
	return f
}

// replicaFlags copies the replica flags given on the command line onto s's
// replica, adding the replica-lag preset's replica to a scenario without one.
func (f *scenarioFlags) replicaFlags(s *sim.Scenario) {
	copiers := map[string]func(r *sim.Replica){
		"replica-capacity":  func(r *sim.Replica) { r.Capacity = f.replica.Capacity },
		"lag-setpoint":      func(r *sim.Replica) { r.Setpoint = f.replica.Setpoint },
		"lag-band":          func(r *sim.Replica) { r.Band = f.replica.Band },
		"lag-metric-period": func(r *sim.Replica) { r.MetricPeriod = f.replica.MetricPeriod },
		"lag-metric-delay":  func(r *sim.Replica) { r.MetricDelay = f.replica.MetricDelay },
	}
	f.fs.Visit(func(fl *flag.Flag) {
		c, ok := copiers[fl.Name]
		if !ok {
			return
		}
		if s.Replica == nil {
			s.Replica = sim.ReplicaLagScenario().Replica
		}
		c(s.Replica)
	})
}

// Scenario returns the scenario the flags describe, or an error that says
// what is wrong with it.
func (f *scenarioFlags) Scenario() (sim.Scenario, error) {
	s := f.s
	s.Plant.Tau, s.Plant.DeadTime = f.tau, f.dead
	if f.preset != "" {
		base, err := sim.Preset(f.preset)
		if err != nil {
			return sim.Scenario{}, err
		}
		s = f.overlay(base, s)
	}
	s.SetpointChanges = append([]sim.SetpointChange(nil), s.SetpointChanges...)
	s.Disturbances = append([]sim.Disturbance(nil), s.Disturbances...)
	s.PlantChanges = append([]sim.PlantChange(nil), s.PlantChanges...)
	s.ProducerChanges = append([]sim.ProducerChange(nil), s.ProducerChanges...)
	s.Bursts = append([]sim.Burst(nil), s.Bursts...)
	if s.Replica != nil {
		r := *s.Replica
		s.Replica = &r
	}
	f.replicaFlags(&s)
	f.latency.apply(f.fs, &s)
	if err := s.Validate(); err != nil {
		return sim.Scenario{}, err
	}
	return s, nil
}

// cutAt splits an item AT=VALUE (what names the item, form its form with an
// example, for the errors) into the trimmed item, AT as an offset from the
// start, and VALUE.
func cutAt(what, form, s string) (item string, at time.Duration, val string, err error) {
	s = strings.TrimSpace(s)
	a, val, ok := strings.Cut(s, "=")
	if !ok {
		return s, 0, "", fmt.Errorf("%s %q: want %s", what, s, form)
	}
	if at, err = parseOffset(a); err != nil {
		return s, 0, "", fmt.Errorf("%s %q: time: %w", what, s, err)
	}
	return s, at, val, nil
}

// parseSetpointChange parses AT=VALUE, e.g. "120m=50".
func parseSetpointChange(s string) (sim.SetpointChange, error) {
	s, t, val, err := cutAt("setpoint change", "AT=VALUE, e.g. 120m=50", s)
	if err != nil {
		return sim.SetpointChange{}, err
	}
	v, err := parsePercent(val)
	if err != nil {
		return sim.SetpointChange{}, fmt.Errorf("setpoint change %q: value: %w", s, err)
	}
	if v <= 0 {
		return sim.SetpointChange{}, fmt.Errorf("setpoint change %q: value %v must be above 0", s, v)
	}
	return sim.SetpointChange{At: t, Value: v}, nil
}

// parseDisturbance parses AT+DURATION=SIZE, e.g. "60m+40m=20".
func parseDisturbance(s string) (sim.Disturbance, error) {
	s = strings.TrimSpace(s)
	span, size, ok := strings.Cut(s, "=")
	if !ok {
		return sim.Disturbance{}, fmt.Errorf("disturbance %q: want AT+DURATION=SIZE, e.g. 60m+40m=20", s)
	}
	at, dur, ok := strings.Cut(span, "+")
	if !ok {
		return sim.Disturbance{}, fmt.Errorf("disturbance %q: want AT+DURATION=SIZE, e.g. 60m+40m=20", s)
	}
	t, err := parseOffset(at)
	if err != nil {
		return sim.Disturbance{}, fmt.Errorf("disturbance %q: start: %w", s, err)
	}
	d, err := parseOffset(dur)
	if err != nil {
		return sim.Disturbance{}, fmt.Errorf("disturbance %q: duration: %w", s, err)
	}
	if d <= 0 {
		return sim.Disturbance{}, fmt.Errorf("disturbance %q: duration %v must be positive", s, d)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(size), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 100 {
		return sim.Disturbance{}, fmt.Errorf("disturbance %q: size %q: want a number of points of CPU within +-100", s, size)
	}
	return sim.Disturbance{At: t, Duration: d, Size: v}, nil
}

// parseOffset parses a Go duration that must not be negative.
func parseOffset(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 90s or 120m", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%v must not be negative", d)
	}
	return d, nil
}

// parsePercent parses a finite number in [0, 100].
func parsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 100 {
		return 0, fmt.Errorf("%q: want a percentage between 0 and 100", s)
	}
	return v, nil
}

// overlay returns preset with the values of the scenario flags that were set
// on the command line taken from parsed.
func (f *scenarioFlags) overlay(preset, parsed sim.Scenario) sim.Scenario {
	s := preset
	copiers := map[string]func(){
		"gain":            func() { s.Plant.Gain = parsed.Plant.Gain },
		"base":            func() { s.Plant.Base = parsed.Plant.Base },
		"tau":             func() { s.Plant.Tau = parsed.Plant.Tau },
		"dead-time":       func() { s.Plant.DeadTime = parsed.Plant.DeadTime },
		"metric-period":   func() { s.MetricPeriod = parsed.MetricPeriod },
		"metric-delay":    func() { s.MetricDelay = parsed.MetricDelay },
		"tick":            func() { s.Tick = parsed.Tick },
		"setpoint":        func() { s.Setpoint = parsed.Setpoint },
		"setpoint-change": func() { s.SetpointChanges = parsed.SetpointChanges },
		"disturbance":     func() { s.Disturbances = parsed.Disturbances },
		"producer-rate":   func() { s.ProducerRate = parsed.ProducerRate },
		"backlog":         func() { s.Backlog = parsed.Backlog },
		"producer-change": func() { s.ProducerChanges = parsed.ProducerChanges },
		"burst":           func() { s.Bursts = parsed.Bursts },
		"plant-change":    func() { s.PlantChanges = parsed.PlantChanges },
		"max-rate":        func() { s.MaxRate = parsed.MaxRate },
		"duration":        func() { s.Duration = parsed.Duration },
		"noise":           func() { s.Noise = parsed.Noise },
		"seed":            func() { s.Seed = parsed.Seed },
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if c, ok := copiers[fl.Name]; ok {
			c()
		}
	})
	return s
}

// listFlag is a repeatable flag whose values are lists: the first use
// replaces the default list and "none" empties it; each use appends what
// parse makes of its value.
type listFlag[T any] struct {
	list   *[]T
	set    bool
	parse  func(string) ([]T, error)
	format func(T) string
}

// newListFlag is a listFlag over list whose values are comma-separated items,
// each parsed by parse.
func newListFlag[T any](list *[]T, parse func(string) (T, error), format func(T) string) *listFlag[T] {
	return &listFlag[T]{list: list, parse: func(v string) ([]T, error) {
		var out []T
		for _, p := range strings.Split(v, ",") {
			x, err := parse(p)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}, format: format}
}

func (f *listFlag[T]) String() string {
	if f == nil || f.list == nil || f.format == nil {
		return ""
	}
	parts := make([]string, len(*f.list))
	for i, v := range *f.list {
		parts[i] = f.format(v)
	}
	return strings.Join(parts, ",")
}

func (f *listFlag[T]) Set(v string) error {
	if !f.set {
		*f.list, f.set = nil, true
	}
	if strings.TrimSpace(v) == "none" {
		*f.list = nil
		return nil
	}
	xs, err := f.parse(v)
	if err != nil {
		return err
	}
	*f.list = append(*f.list, xs...)
	return nil
}

func newSetpointChangesFlag(list *[]sim.SetpointChange) *listFlag[sim.SetpointChange] {
	return newListFlag(list, parseSetpointChange,
		func(c sim.SetpointChange) string { return fmt.Sprintf("%v=%v", c.At, c.Value) })
}

func newDisturbancesFlag(list *[]sim.Disturbance) *listFlag[sim.Disturbance] {
	return newListFlag(list, parseDisturbance,
		func(d sim.Disturbance) string { return fmt.Sprintf("%v+%v=%v", d.At, d.Duration, d.Size) })
}

func newProducerChangesFlag(list *[]sim.ProducerChange) *listFlag[sim.ProducerChange] {
	return newListFlag(list, parseProducerChange,
		func(c sim.ProducerChange) string { return fmt.Sprintf("%v=%v", c.At, c.Rate) })
}

func newBurstsFlag(list *[]sim.Burst) *listFlag[sim.Burst] {
	return newListFlag(list, parseBurst, func(b sim.Burst) string { return fmt.Sprintf("%v=%d", b.At, b.N) })
}

// newPlantChangesFlag is a repeatable --plant-change: AT=gain=G[,tau=T][,dead-time=D],
// several changes comma-separated or one per use (an item without AT adds
// to the change before it).
func newPlantChangesFlag(list *[]sim.PlantChange) *listFlag[sim.PlantChange] {
	return &listFlag[sim.PlantChange]{list: list, parse: parsePlantChanges,
		format: func(c sim.PlantChange) string { return c.String() }}
}

// parseProducerChange parses AT=RATE, e.g. "30m=400".
func parseProducerChange(s string) (sim.ProducerChange, error) {
	s, t, val, err := cutAt("producer change", "AT=RATE, e.g. 30m=400", s)
	if err != nil {
		return sim.ProducerChange{}, err
	}
	r, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
	if err != nil || math.IsNaN(r) || math.IsInf(r, 0) || r < 0 || r > 1e9 {
		return sim.ProducerChange{}, fmt.Errorf("producer change %q: rate %q: want messages/s in [0, 1e9]", s, val)
	}
	return sim.ProducerChange{At: t, Rate: r}, nil
}

// parseBurst parses AT=N, e.g. "60m=300000".
func parseBurst(s string) (sim.Burst, error) {
	s, t, val, err := cutAt("burst", "AT=N, e.g. 60m=300000", s)
	if err != nil {
		return sim.Burst{}, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
	if err != nil || n < 0 || n > 1e12 {
		return sim.Burst{}, fmt.Errorf("burst %q: size %q: want a whole number of messages in [0, 1e12]", s, val)
	}
	return sim.Burst{At: t, N: n}, nil
}
