package loop

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Signals: a loop may regulate several constraints at once (override
// control): CPU, the replication lag of a replica, a latency. The
// top-level attributes of PARAMS are the first signal, named by `signal`
// (cpu by default), so that an item written for one metric is a one-signal
// loop unchanged; further signals go in the map `signals`, each with its own
// metric, setpoint, gains or model, and stale policy, under the same
// attribute names. Every signal has its own controller; the rate applied is
// the lowest of their outputs, and the controllers not selected track it
// (control.Override).

// Attribute names of a loop's signals.
const (
	attrSignal  = "signal"
	attrSignals = "signals"
)

// DefaultSignal is the name of the first signal when `signal` is absent.
const DefaultSignal = "cpu"

// MaxSignals bounds the signals of one loop, the first included: each is
// one metric query and one controller per tick.
const MaxSignals = 8

// signalNameRE is what a signal's name must match: it keys STATE, the
// dashboard's charts and the history's points.
var signalNameRE = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// signalParam reports whether name is an attribute of paramTable that a
// signal of the `signals` map may set: one declared per signal
// (param.signal), meaning what it means at the top level for the first
// signal; signalAttrNames adds the metric sources' query attributes. The
// others (mode, rates, slew limit, tick period, RATE's lifetime, safe rate,
// nodes, ...) are the loop's.
func signalParam(name string) bool {
	f, ok := lookupParam(name)
	return ok && f.signal
}

// Controls are what a signal holds and how its controller moves the rate:
// the settings of control.Config that are the signal's own. Params embeds
// the first signal's, Signal a further signal's.
type Controls struct {
	// Unit is the measurement's unit as shown (`%`, `s`, `ms`; "" means %
	// for the first signal); only a signal in `%` has its measurement
	// checked against [0, 100] and the ceiling cut (`ceiling`). Every
	// signal limits the rate while its measurement is above its setpoint.
	Unit string `json:"unit,omitempty"`
	// Setpoint is the value to hold: for a signal in % (CPU utilization)
	// in (0, 100], otherwise > 0 in the signal's unit.
	Setpoint float64 `json:"setpoint"`
	// Kp (messages/s per point), Ki (per second) and Kd (seconds) are the
	// gains of control.Config.
	Kp float64 `json:"kp"`
	Ki float64 `json:"ki"`
	Kd float64 `json:"kd"`
	// DerivativeFilter is the time constant of the derivative filter.
	DerivativeFilter time.Duration `json:"derivative_filter,omitempty"`
	// AntiWindup is conditional, back-calculation or none.
	AntiWindup control.AntiWindup `json:"anti_windup,omitempty"`
	// TrackingTime is the back-calculation tracking time constant.
	TrackingTime time.Duration `json:"tracking_time,omitempty"`
	// SetpointFilter is the time constant of the setpoint filter.
	SetpointFilter time.Duration `json:"setpoint_filter,omitempty"`
	// DelayAware makes the integrator delay-aware (control.Config.DelayAware;
	// needs Feedforward); NoiseBand makes the integral gain depend on the
	// error's size (control.Config.NoiseBand, points of CPU).
	DelayAware bool    `json:"delay_aware,omitempty"`
	NoiseBand  float64 `json:"noise_band,omitempty"`
	// AdaptGain makes the delay-aware integrator re-identify the plant's
	// gain online (control.Config.AdaptGain; needs DelayAware).
	AdaptGain bool `json:"adapt_gain,omitempty"`
	// DrainFeedforward makes a replication lag's controller measure the
	// replica's pace from the lag and the rates applied, and ask for it
	// plus its own terms (control.Input.Feedforward; drain.go): a further
	// signal in s without a model.
	DrainFeedforward bool `json:"drain_feedforward,omitempty"`
}

// Sensing is how a signal is measured and what its loop does while the
// measurement is stale or missing. Params embeds the first signal's, Signal
// a further signal's.
type Sensing struct {
	// Metric is the measurement.
	Metric metric.Query `json:"metric"`
	// Stale is what the loop does while the metric is stale or missing;
	// StaleAfter is the age (after the datapoint's period ends) beyond which
	// the newest datapoint is stale. A further signal's Stale.SafeRate is
	// zero: the safe rate is the loop's.
	Stale      control.StalePolicy `json:"stale"`
	StaleAfter time.Duration       `json:"stale_after"`
}

// Signal is one further signal of a loop (Params.Signals): a metric with
// its setpoint, its controller and its stale policy. The fields mean what
// Params' fields of the same names mean for the first signal.
type Signal struct {
	// Name names the signal (`[a-z0-9_-]{1,32}`): the key in `signals`.
	Name string `json:"name"`
	Controls
	// Feedforward is the signal's plant model; nil when none.
	Feedforward *control.FOPDT `json:"feedforward,omitempty"`
	Sensing
}

// FirstSignal returns the name of the loop's first signal (the top-level
// attributes).
func (p Params) FirstSignal() string {
	if p.SignalName == "" {
		return DefaultSignal
	}
	return p.SignalName
}

// SignalNames returns the names of the loop's signals, the first one first.
func (p Params) SignalNames() []string {
	names := []string{p.FirstSignal()}
	for _, s := range p.Signals {
		names = append(names, s.Name)
	}
	return names
}

// ForSignal returns the loop's parameters as seen by signal s: the loop's
// with s's metric, setpoint, controller and stale policy in place of the
// first signal's. Its ControlConfig and StalePolicy are s's.
func (p Params) ForSignal(s Signal) Params {
	q := p.Clone()
	q.Signals, q.Nodes, q.Regulate = nil, nil, ""
	q.SignalName, q.Controls = s.Name, s.Controls
	if q.Unit == "" {
		q.Unit = unitNone
	}
	q.Feedforward = nil
	if s.Feedforward != nil {
		m := *s.Feedforward
		q.Feedforward = &m
	}
	safeRate := q.Stale.SafeRate // the loop's
	q.Sensing = s.Sensing
	q.Metric.Dimensions = maps.Clone(s.Metric.Dimensions)
	q.Stale.SafeRate = safeRate
	return q
}

// signalOf is the inverse of ForSignal: the signal named name that q
// describes.
func signalOf(name string, q Params) Signal {
	s := Signal{Name: name, Controls: q.Controls, Feedforward: q.Feedforward, Sensing: q.Sensing}
	s.Stale.SafeRate = 0 // the loop's
	return s
}

// unitNone is the unit ForSignal gives a further signal without one: not a
// percentage.
const unitNone = "1"

// percent reports whether the signal is a percentage (CPU): the first
// signal without a unit, or any in %.
func (p Params) percent() bool { return p.Unit == "" || p.Unit == "%" }

// decodeSignals reads the signals attribute: a map (M) of signal name to a
// map of the attributes in signalAttrs, decoded by their entries in
// paramTable. Field errors name the signal: signals.<name>.<attribute>.
func (d *decoder) decodeSignals(loopID string) []Signal {
	m, ok := attr[map[string]any](d, attrSignals, kindSignals)
	if !ok {
		return nil
	}
	if len(m)+1 > MaxSignals {
		d.fail(attrSignals, "%d signals besides the first; a loop has at most %d in all", len(m), MaxSignals)
		return nil
	}
	var out []Signal
	for _, name := range sortedKeys(m) {
		field := attrSignals + "." + name
		attrs, ok := m[name].(map[string]any)
		if !ok {
			d.fail(field, "want a map (M) of the signal's attributes (%s, ...), got %s", AttrSetpoint, describe(m[name]))
			continue
		}
		sd := &decoder{attrs: attrs, loopID: loopID, sources: d.sources}
		sd.retiredValues()
		names := signalAttrNames(d.sources)
		for _, k := range sortedKeys(attrs) {
			if !slices.Contains(names, k) && !retired(k) {
				sd.fail(k, "not an attribute of a signal (%s); loop-wide attributes stay at the top level", strings.Join(names, ", "))
			}
		}
		q := Params{Loop: loopID}
		for _, f := range paramTable {
			if !f.signal {
				continue
			}
			if f.required && !sd.present(f.name) {
				sd.fail(f.name, "missing; required: %s", f.plainDoc())
			}
			f.decode(sd, &q, f.name)
		}
		for _, e := range sd.errs {
			d.fail(field+"."+e.Field, "%s", e.Reason)
		}
		if len(sd.errs) == 0 {
			out = append(out, signalOf(name, q))
		}
	}
	return out
}

// checkSignals checks the signals: their names and number, and each further signal as the first one is checked (gains,
// model, metric, stale policy), its fields named signals.<name>.<attribute>.
func (p Params) checkSignals(sources metric.Sources, fail failFunc) {
	if !signalNameRE.MatchString(p.FirstSignal()) {
		fail(attrSignal, "%q: a signal's name is 1 to 32 of a-z, 0-9, _ and -", truncate(p.SignalName))
	}
	if p.DrainFeedforward {
		fail(attrDrainFeedforward, "only a further signal (in %s) measures its drain: the first signal's controller runs alone in a one-signal loop", attrSignals)
	}
	if len(p.Signals)+1 > MaxSignals {
		fail(attrSignals, "%d signals besides the first; a loop has at most %d in all", len(p.Signals), MaxSignals)
	}
	seen := map[string]bool{p.FirstSignal(): true}
	names := signalAttrNames(sources)
	for _, s := range p.Signals {
		field := attrSignals + "." + s.Name
		if !signalNameRE.MatchString(s.Name) {
			fail(attrSignals+"."+fmt.Sprintf("%q", truncate(s.Name)), "a signal's name is 1 to 32 of a-z, 0-9, _ and -")
			continue
		}
		if seen[s.Name] {
			fail(field, "a second signal named %s (the top-level attributes are the signal named by %s, default %s)", s.Name, attrSignal, DefaultSignal)
			continue
		}
		seen[s.Name] = true
		q := p.ForSignal(s)
		sub := func(f, format string, args ...any) {
			if slices.Contains(names, f) {
				fail(field+"."+f, format, args...)
			}
		}
		q.checkGains(sub)
		q.checkMetric(sources, sub)
		q.checkStale(sub)
	}
}

// encodeSignals writes the signals attribute.
func encodeSignals(p Params, a map[string]any, name string) {
	if len(p.Signals) == 0 {
		return
	}
	m := make(map[string]any, len(p.Signals))
	for _, s := range p.Signals {
		q := p.ForSignal(s)
		q.Unit = s.Unit
		all := q.tableAttrs()
		sa := make(map[string]any)
		for k, v := range all {
			if signalParam(k) {
				sa[k] = v
			}
		}
		m[s.Name] = sa
	}
	a[name] = m
}

// measurementRange returns the valid range of a signal's measurement:
// [0, 100] for a percentage, [0, MaxFloat64] otherwise.
func (p Params) measurementRange() (lo, hi float64) {
	if p.percent() {
		return 0, 100
	}
	return 0, math.MaxFloat64
}
