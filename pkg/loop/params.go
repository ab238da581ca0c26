package loop

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Mode is a loop's operating mode.
type Mode string

// Modes of a loop.
const (
	// ModeAuto closes the loop: the controller writes the rate it computes.
	ModeAuto Mode = "auto"
	// ModeManual writes the operator's manual rate; the controller tracks it
	// so that the switch back to auto is bumpless.
	ModeManual Mode = "manual"
	// ModeShadow computes and records the rate in STATE but does not write
	// RATE: for trying a loop beside an existing system.
	ModeShadow Mode = "shadow"
)

// Defaults of optional PARAMS attributes.
const (
	DefaultTickPeriod = time.Minute
	DefaultStaleAfter = 5 * time.Minute
	// DefaultRateTTLTicks is the lifetime of a RATE item in tick periods.
	DefaultRateTTLTicks = 3
	// DefaultDemandHeadroom and DefaultCeiling are the defaults of
	// demand_headroom and ceiling.
	DefaultDemandHeadroom = 0.5
	DefaultCeiling        = 95
)

// Params is the PARAMS item of a loop: what an operator edits. Decode it with
// DecodeParams, which also validates it; encode it with Attrs.
type Params struct {
	// Loop is the loop id (the item's partition key).
	Loop string `json:"loop"`
	// Enabled is false for a loop the controller skips.
	Enabled bool `json:"enabled"`
	// Mode is auto, manual or shadow; ManualRate is the rate in manual mode.
	Mode       Mode    `json:"mode"`
	ManualRate float64 `json:"manual_rate,omitempty"`
	// SignalName names the first signal, whose setpoint, controller, metric
	// and stale policy are the top-level fields ("" means DefaultSignal,
	// cpu). See signals.go.
	SignalName string `json:"signal,omitempty"`
	// Controls are the first signal's unit, direction, setpoint and
	// controller settings.
	Controls
	// DemandHeadroom and Ceiling are control.DemandConfig's Headroom and
	// Ceiling: the hold of a demand-limited loop near what the consumers
	// took, and the decisive cut at a measurement that cannot show the
	// overload (demand.go).
	DemandHeadroom float64 `json:"demand_headroom,omitempty"`
	Ceiling        float64 `json:"ceiling,omitempty"`
	// DepthQueue names the SQS queue whose depth the tick reads for the
	// dashboard (AWS/SQS ApproximateNumberOfMessagesVisible); empty: none.
	DepthQueue string `json:"depth_queue,omitempty"`
	// Mapping is the SQS event source mapping the loop owns (esm_uuid):
	// the tick sets its MaximumConcurrency (mapping.go). Nil when none.
	Mapping *MappingConfig `json:"mapping,omitempty"`
	// Feedforward is the first signal's identified plant model for reference
	// feedforward; nil when none.
	Feedforward *control.FOPDT `json:"feedforward,omitempty"`
	// MinRate and MaxRate bound the rate, messages/s; SlewLimit is the largest
	// change per tick (0: none).
	MinRate   float64 `json:"min_rate"`
	MaxRate   float64 `json:"max_rate"`
	SlewLimit float64 `json:"slew_limit,omitempty"`
	// TickPeriod is the interval between the loop's ticks.
	TickPeriod time.Duration `json:"tick_period"`
	// RateTTL is how long a written RATE stays valid.
	RateTTL time.Duration `json:"rate_ttl"`
	// Sensing is the first signal's metric and stale policy. For
	// fail-closed the safe rate is MinRate.
	Sensing
	// Nodes are the destination's nodes for the balancer, sorted by name;
	// nil for a loop with one node (no balancing). See nodes.go.
	Nodes []Node `json:"nodes,omitempty"`
	// Balance is the balancer's configuration as edited; nil when no
	// balance_* attribute is set (BalanceConfig returns the defaults).
	Balance *balance.Config `json:"balance,omitempty"`
	// Regulate is what the rate loop of a loop with nodes holds at the
	// setpoint: max (the hottest node; "" means max) or mean.
	Regulate Regulate `json:"regulate,omitempty"`
	// Signals are the loop's further signals, sorted by name; nil for a
	// loop with one signal. The rate is the lowest of every signal's
	// controller's output (override control; signals.go).
	Signals []Signal `json:"signals,omitempty"`
	// Experiment is the guarded experiment asked of the loop; nil for none
	// (experiment.go).
	Experiment *Experiment `json:"experiment,omitempty"`
}

// FieldError says why one PARAMS attribute was refused.
type FieldError struct {
	// Field is the attribute name, as in the item.
	Field string
	// Reason says what is wrong and what is expected.
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// ParamsError is a refused PARAMS item: every problem found, each with the
// attribute it concerns.
type ParamsError struct {
	Loop   string
	Fields []FieldError
}

func (e *ParamsError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return fmt.Sprintf("PARAMS of loop %q refused: %s", e.Loop, strings.Join(parts, "; "))
}

// Reason is the refusal as one line for the operator (the status item).
func (e *ParamsError) Reason() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return strings.Join(parts, "; ")
}

// ErrParamsMissing is returned by DecodeParams for a loop without a PARAMS
// item.
var ErrParamsMissing = errors.New("PARAMS item missing")

// Attribute names of the PARAMS item.
const (
	AttrEnabled          = "enabled"
	AttrMode             = "mode"
	AttrManualRate       = "manual_rate"
	AttrSetpoint         = "setpoint"
	AttrKp               = "kp"
	AttrKi               = "ki"
	AttrKd               = "kd"
	AttrDerivativeFilter = "derivative_filter"
	AttrAntiWindup       = "anti_windup"
	AttrTrackingTime     = "tracking_time"
	AttrSetpointFilter   = "setpoint_filter"
	AttrDelayAware       = "delay_aware"
	AttrAdaptGain        = "adapt_gain"
	AttrDrainFeedforward = "drain_feedforward"
	AttrNoiseBand        = "noise_band"
	AttrDemandHeadroom   = "demand_headroom"
	AttrCeiling          = "ceiling"
	AttrDepthQueue       = "depth_queue"
	AttrFFGain           = "ff_gain"
	AttrFFBase           = "ff_base"
	AttrFFTau            = "ff_tau"
	AttrFFDeadTime       = "ff_dead_time"
	AttrMinRate          = "min_rate"
	AttrMaxRate          = "max_rate"
	AttrSlewLimit        = "slew_limit"
	AttrTickPeriod       = "tick_period"
	AttrRateTTL          = "rate_ttl"
	// AttrMetricSource names the metric source; the source declares the
	// other metric_* attributes (metricparams.go).
	AttrMetricSource = "metric_source"
	AttrStalePolicy  = "stale_policy"
	AttrSafeRate     = "safe_rate"
	AttrStaleAfter   = "stale_after"
	AttrStaleDecay   = "stale_decay"
	AttrStaleGrace   = "stale_grace"
)

// kind is the type an attribute must have.
type kind int

const (
	kindNumber kind = iota
	kindString
	kindDuration
	kindBool
	kindStringMap
	kindNodes
	kindSignals
)

func (k kind) String() string {
	switch k {
	case kindNumber:
		return "a number (N)"
	case kindString:
		return "a string (S)"
	case kindDuration:
		return `a duration string such as "60s" or "1m30s" (S)`
	case kindBool:
		return "a boolean (BOOL)"
	case kindNodes:
		return "a map (M) of node name to a map {endpoint (S), metric (S)}"
	case kindSignals:
		return "a map (M) of signal name to a map (M) of its attributes"
	default:
		return "a map of strings (M)"
	}
}

// short is the kind as the docs' table shows it.
func (k kind) short() string {
	return [...]string{kindNumber: "N", kindString: "S", kindDuration: "S duration", kindBool: "BOOL", kindStringMap: "M of S", kindNodes: "M of M", kindSignals: "M of M"}[k]
}

// ignoredAttrs are attributes of a PARAMS item that are not parameters.
var ignoredAttrs = map[string]bool{"pk": true, "sk": true, "updated_at": true, "updated_by": true, "comment": true, AttrEditVersion: true}

// ParamsAttributes returns the names of the PARAMS attributes with their
// documentation, the query attributes of sources included, sorted: for help
// texts and forms.
func ParamsAttributes(sources metric.Sources) [][2]string {
	sorted := slices.SortedFunc(slices.Values(paramsFor(sources)), func(a, b param) int { return strings.Compare(a.name, b.name) })
	out := make([][2]string, len(sorted))
	for i, p := range sorted {
		req := ""
		if p.required {
			req = "required; "
		}
		out[i] = [2]string{p.name, req + p.kind.String() + ": " + p.plainDoc()}
	}
	return out
}

// decoder collects field errors while reading attributes.
type decoder struct {
	attrs  map[string]any
	errs   []FieldError
	loopID string
	// sources are the metric sources a loop may name.
	sources metric.Sources
}

func (d *decoder) fail(field, format string, args ...any) {
	d.errs = append(d.errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null (NULL)"
	case string:
		return fmt.Sprintf("the string (S) %q", truncate(x))
	case float64, json.Number, int, int64:
		return fmt.Sprintf("the number (N) %v", x)
	case bool:
		return fmt.Sprintf("the boolean (BOOL) %v", x)
	case map[string]any:
		return "a map (M)"
	case []any:
		return "a list (L)"
	default:
		return fmt.Sprintf("a value of type %T", v)
	}
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// failed reports whether the attribute was refused.
func (d *decoder) failed(name string) bool {
	return slices.ContainsFunc(d.errs, func(e FieldError) bool { return e.Field == name })
}

func (d *decoder) present(name string) bool {
	_, ok := d.attrs[name]
	return ok
}

func (d *decoder) number(name string, def float64) float64 {
	v, ok := d.attrs[name]
	if !ok {
		return def
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			d.fail(name, "%q is not a number", x.String())
			return def
		}
	default:
		d.fail(name, "want %s, got %s", kindNumber, describe(v))
		return def
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(name, "%v is not a finite number", f)
		return def
	}
	return f
}

// attr returns attribute name as a T. ok is false when the attribute is
// absent, or of another type: then it is refused, as not what want (a kind
// or a text) says.
func attr[T any](d *decoder, name string, want any) (x T, ok bool) {
	v, ok := d.attrs[name]
	if !ok {
		return x, false
	}
	if x, ok = v.(T); !ok {
		d.fail(name, "want %s, got %s", want, describe(v))
	}
	return x, ok
}

func (d *decoder) str(name, def string) string {
	if s, ok := attr[string](d, name, kindString); ok {
		return s
	}
	return def
}

func (d *decoder) duration(name string, def time.Duration) time.Duration {
	s, ok := attr[string](d, name, kindDuration)
	if !ok {
		return def
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.fail(name, "%q is not a duration; want e.g. \"60s\" or \"1m30s\"", truncate(s))
		return def
	}
	if dur < 0 {
		d.fail(name, "%v must not be negative", dur)
		return def
	}
	return dur
}

func (d *decoder) boolean(name string, def bool) bool {
	if b, ok := attr[bool](d, name, kindBool); ok {
		return b
	}
	return def
}

func (d *decoder) stringMap(name string) map[string]string {
	m, ok := attr[map[string]any](d, name, kindStringMap)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			d.fail(name+"."+k, "want a string (S), got %s", describe(x))
			continue
		}
		out[k] = s
	}
	return out
}

// unknown refuses the attributes that are not parameters.
func (d *decoder) unknown() {
	for _, name := range sortedKeys(d.attrs) {
		if _, ok := lookupParamIn(d.sources, name); !ok && !ignoredAttrs[name] && !strings.HasPrefix(name, "x_") {
			field := name
			if strings.TrimSpace(field) == "" {
				field = strconv.Quote(name)
			}
			d.fail(field, "unknown attribute (names are snake_case, e.g. %s; prefix x_ for your own)", AttrSetpoint)
		}
	}
}

// DecodeParams decodes and validates the attributes of a PARAMS item. The
// values are those of a DynamoDB item converted to Go: string (S), float64
// (N), bool (BOOL), map[string]any (M), []any (L) and nil (NULL); json.Number
// and int are accepted for numbers. sources are the metric sources a loop
// may name in metric_source (the first is the default); each reads and
// checks its own metric_* attributes. A refusal is a *ParamsError that lists
// every problem with its attribute and reason.
func DecodeParams(loopID string, attrs map[string]any, sources metric.Sources) (Params, error) {
	if attrs == nil {
		return Params{}, fmt.Errorf("loop %q: %w", loopID, ErrParamsMissing)
	}
	d := &decoder{attrs: attrs, loopID: loopID, sources: sources}
	d.unknown()
	p := Params{Loop: loopID}
	for _, f := range paramTable {
		if f.required && !d.present(f.name) {
			d.fail(f.name, "missing; required: %s", f.plainDoc())
		}
		f.decode(d, &p, f.name)
	}
	// Only values that decoded are checked further: one reason per field.
	bad := make(map[string]bool, len(d.errs))
	for _, e := range d.errs {
		bad[e.Field] = true
	}
	if p.Mode == ModeManual && !d.present(AttrManualRate) {
		d.fail(AttrManualRate, "missing; manual mode needs the rate to hold, messages/s")
		bad[AttrManualRate] = true
	}
	// A check across fields is left out when a field it compares with did
	// not decode: its reason would be about a default, not the edit.
	dependsOn := map[string][]string{
		AttrRateTTL:           {AttrTickPeriod},
		AttrMinRate:           {AttrMaxRate},
		AttrManualRate:        {AttrMinRate, AttrMaxRate, AttrMode},
		AttrSafeRate:          {AttrMinRate, AttrStalePolicy},
		AttrKp:                {AttrKi},
		AttrESMMinConcurrency: {AttrESMMaxConcurrency},
	}
	for _, e := range p.check(sources) {
		skip := bad[e.Field]
		for _, dep := range dependsOn[e.Field] {
			skip = skip || bad[dep]
		}
		if !skip {
			d.errs = append(d.errs, e)
		}
	}
	if len(d.errs) > 0 {
		return p, &ParamsError{Loop: loopID, Fields: d.errs}
	}
	return p, nil
}

// Validate reports whether p can drive a loop whose metric is read by one
// of sources; a refusal is a *ParamsError.
func (p Params) Validate(sources metric.Sources) error {
	if errs := p.check(sources); len(errs) > 0 {
		return &ParamsError{Loop: p.Loop, Fields: errs}
	}
	return nil
}

func (p Params) check(sources metric.Sources) []FieldError {
	var errs []FieldError
	fail := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	p.checkMode(fail)
	p.checkGains(fail)
	p.checkRates(fail)
	p.checkMetric(sources, fail)
	p.checkStale(fail)
	p.checkNodes(sources, fail)
	p.checkMapping(fail)
	p.checkSignals(sources, fail)
	p.checkExperiment(fail)
	return errs
}

// failFunc records a refused field.
type failFunc = func(field, format string, args ...any)

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkMode checks the mode and the manual rate.
func (p Params) checkMode(fail failFunc) {
	switch p.Mode {
	case ModeAuto, ModeShadow:
	case ModeManual:
		if !finite(p.ManualRate) || p.ManualRate < 0 {
			fail(AttrManualRate, "%v: manual mode needs a manual rate >= 0", p.ManualRate)
		} else if p.ManualRate < p.MinRate || p.ManualRate > p.MaxRate {
			fail(AttrManualRate, "%v is outside [min_rate, max_rate] = [%v, %v]", p.ManualRate, p.MinRate, p.MaxRate)
		}
	default:
		fail(AttrMode, "unknown mode %q; want auto, manual or shadow", truncate(string(p.Mode)))
	}
}

// checkGains checks the setpoint and the controller's gains, filters,
// anti-windup and feedforward model.
func (p Params) checkGains(fail failFunc) {
	if lo, hi := p.measurementRange(); !finite(p.Setpoint) || p.Setpoint <= lo || p.Setpoint > hi {
		if p.percent() {
			fail(AttrSetpoint, "%v is outside (0, 100] percent", p.Setpoint)
		} else {
			fail(AttrSetpoint, "%v must be a finite number > 0", p.Setpoint)
		}
	}
	for _, g := range []struct {
		name string
		v    float64
	}{{AttrKp, p.Kp}, {AttrKi, p.Ki}, {AttrKd, p.Kd}, {AttrSlewLimit, p.SlewLimit}} {
		if !finite(g.v) || g.v < 0 {
			fail(g.name, "%v must be a finite number >= 0", g.v)
		}
	}
	if p.Kp == 0 && p.Ki == 0 && p.Mode != ModeManual {
		fail(AttrKp, "kp and ki are both 0: the controller would never move the rate")
	}
	switch p.AntiWindup {
	case control.AntiWindupNone, control.AntiWindupConditional, control.AntiWindupBackCalculation:
	default:
		fail(AttrAntiWindup, "unknown scheme %q; want conditional, back-calculation or none", truncate(string(p.AntiWindup)))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{AttrDerivativeFilter, p.DerivativeFilter}, {AttrTrackingTime, p.TrackingTime}, {AttrSetpointFilter, p.SetpointFilter}} {
		if f.v < 0 {
			fail(f.name, "%v must not be negative", f.v)
		}
	}
	if m := p.Feedforward; m != nil {
		if err := m.Validate(); err != nil {
			field := AttrFFGain
			var fe *control.ModelFieldError
			if errors.As(err, &fe) {
				field = modelAttrs[fe.Field]
			}
			fail(field, "feedforward model: %v", err)
		}
	}
	if p.DelayAware && p.Feedforward == nil {
		fail(AttrDelayAware, "the delay-aware integrator needs the feedforward model (ff_gain, ff_base, ff_tau, ff_dead_time)")
	}
	if p.AdaptGain && !p.DelayAware {
		fail(AttrAdaptGain, "gain adaptation works in the delay-aware integrator: set delay_aware=true (and the feedforward model)")
	}
	if p.DrainFeedforward && (p.Unit != "s" || p.Feedforward != nil) {
		fail(AttrDrainFeedforward, "the drain is measured for a replication lag, unit s, without a feedforward model (ff_gain); this signal's unit is %q%s", p.Unit, map[bool]string{true: " and it has a model"}[p.Feedforward != nil])
	}
	if !finite(p.NoiseBand) || p.NoiseBand < 0 {
		fail(AttrNoiseBand, "%v must be a finite number >= 0", p.NoiseBand)
	}
	if !finite(p.DemandHeadroom) || p.DemandHeadroom < 0 || p.DemandHeadroom > 100 {
		fail(AttrDemandHeadroom, "%v must be a number in [0, 100]", p.DemandHeadroom)
	}
	if !finite(p.Ceiling) || p.Ceiling < 0 || p.Ceiling > 100 {
		fail(AttrCeiling, "%v must be a percentage in [0, 100] (0: off)", p.Ceiling)
	}
}

// checkRates checks the rate bounds, the tick period and RATE's lifetime.
func (p Params) checkRates(fail failFunc) {
	switch {
	case !finite(p.MinRate) || p.MinRate < 0:
		fail(AttrMinRate, "%v must be a finite number >= 0", p.MinRate)
	case !finite(p.MaxRate) || p.MaxRate <= 0:
		fail(AttrMaxRate, "%v must be a finite number > 0", p.MaxRate)
	case p.MinRate >= p.MaxRate:
		fail(AttrMinRate, "min_rate %v is not below max_rate %v", p.MinRate, p.MaxRate)
	}
	if p.TickPeriod < time.Second {
		fail(AttrTickPeriod, "%v is shorter than 1s", p.TickPeriod)
	}
	if p.RateTTL < p.TickPeriod {
		fail(AttrRateTTL, "%v is shorter than the tick period %v: consumers would find the rate expired between ticks", p.RateTTL, p.TickPeriod)
	}
}

// checkStale checks the stale-metric policy.
func (p Params) checkStale(fail failFunc) {
	if err := p.StalePolicy().Validate(); err != nil {
		field := AttrStalePolicy
		var fe *control.StaleFieldError
		if errors.As(err, &fe) {
			field = staleAttrs[fe.Field]
		}
		fail(field, "%v", err)
	}
	if p.StaleAfter <= 0 {
		fail(AttrStaleAfter, "%v must be positive", p.StaleAfter)
	}
}

// modelAttrs maps the fields of control.FOPDT onto their attributes.
var modelAttrs = map[string]string{"Gain": AttrFFGain, "Tau": AttrFFTau, "DeadTime": AttrFFDeadTime, "Base": AttrFFBase}

// staleAttrs maps the fields of control.StalePolicy onto their attributes.
var staleAttrs = map[string]string{"Action": AttrStalePolicy, "DecayTime": AttrStaleDecay, "SafeRate": AttrSafeRate, "Grace": AttrStaleGrace}

// ControlConfig returns the controller configuration for p.
func (p Params) ControlConfig() control.Config {
	c := control.Config{
		Kp:               p.Kp,
		Ki:               p.Ki,
		Kd:               p.Kd,
		DerivativeFilter: p.DerivativeFilter,
		Min:              p.MinRate,
		Max:              p.MaxRate,
		Slew:             p.SlewLimit,
		AntiWindup:       p.AntiWindup,
		TrackingTime:     p.TrackingTime,
		SetpointFilter:   p.SetpointFilter,
		DelayAware:       p.DelayAware,
		AdaptGain:        p.AdaptGain,
		NoiseBand:        p.NoiseBand,
		DemandConfig:     control.DemandConfig{Headroom: p.DemandHeadroom, Ceiling: p.Ceiling},
		// Only a percentage has a ceiling to cut at.
		// After a missed schedule a datapoint stands for at most three
		// tick periods of integration.
		MaxGap: 3 * p.TickPeriod,
	}
	c.MeasurementMin, c.MeasurementMax = p.measurementRange()
	if !p.percent() {
		c.Ceiling = 0
	}
	if p.Feedforward != nil {
		m := *p.Feedforward
		c.Feedforward = &m
	}
	if p.Mode == ModeManual {
		c.Mode = control.ModeManual
		c.ManualRate = p.ManualRate
	}
	return c
}

// StalePolicy returns the stale-metric policy in force: fail-closed falls to
// the minimum rate.
func (p Params) StalePolicy() control.StalePolicy {
	s := p.Stale
	if s.Action == control.StaleFailClosed {
		s.SafeRate = p.MinRate
	}
	return s
}

// Attrs encodes p as PARAMS item attributes (without pk and sk), in the
// types DecodeParams reads, each metric query by its source among sources:
// DecodeParams(p.Loop, p.Attrs(sources), sources) returns p.
func (p Params) Attrs(sources metric.Sources) map[string]any {
	a := p.tableAttrs()
	encodeMetric(sources, p.Metric, len(p.Nodes) > 0, a)
	if m, ok := a[AttrSignals].(map[string]any); ok {
		for _, s := range p.Signals {
			if sa, ok := m[s.Name].(map[string]any); ok {
				encodeMetric(sources, s.Metric, false, sa)
			}
		}
	}
	return a
}

// tableAttrs encodes the attributes of paramTable's entries: all but the
// metric queries' (Attrs adds them).
func (p Params) tableAttrs() map[string]any {
	a := make(map[string]any, len(paramTable))
	for _, f := range paramTable {
		f.encode(p, a, f.name)
	}
	return a
}

// Fingerprint returns a short hash of a PARAMS item's attributes: the
// controller records which edit it last checked, so that it reports each
// edit's status once.
func Fingerprint(attrs map[string]any) string {
	if attrs == nil {
		return ""
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		// Values that JSON cannot encode (NaN) still get a stable print.
		b = fmt.Appendf(nil, "%v", attrs)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ParseParamValue parses the text form of a PARAMS attribute (a command-line
// `name=value`, a form field) into the value DecodeParams reads: numbers for
// N attributes, strings for S and durations, booleans for BOOL, and for
// a map of strings (metric_dimensions) either a JSON object or
// `Name=value,Name2=value2`; sources declare the metric query attributes. An
// unknown attribute or unparsable text is an error that says why.
func ParseParamValue(sources metric.Sources, name, text string) (any, error) {
	s, ok := lookupParamIn(sources, name)
	if !ok {
		if strings.HasPrefix(name, "x_") {
			return text, nil
		}
		return nil, &FieldError{Field: name, Reason: "unknown attribute"}
	}
	switch s.kind {
	case kindNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &FieldError{Field: name, Reason: fmt.Sprintf("%q is not a finite number", truncate(text))}
		}
		return f, nil
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return nil, &FieldError{Field: name, Reason: fmt.Sprintf("%q is not true or false", truncate(text))}
		}
		return b, nil
	case kindSignals:
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, &FieldError{Field: name, Reason: fmt.Sprintf(`not a JSON object {"lag": {"setpoint": 10, "kp": 20, ...}}: %v`, err)}
		}
		return m, nil
	case kindNodes:
		var raw map[string]map[string]string
		if err := json.Unmarshal([]byte(text), &raw); err != nil {
			return nil, &FieldError{Field: name, Reason: fmt.Sprintf(`not a JSON object {"node": {"endpoint": "http://...", "metric": "..."}}: %v`, err)}
		}
		m := make(map[string]any, len(raw))
		for k, n := range raw {
			nm := make(map[string]any, len(n))
			for kk, v := range n {
				nm[kk] = v
			}
			m[k] = nm
		}
		return m, nil
	case kindStringMap:
		text = strings.TrimSpace(text)
		m := map[string]any{}
		if strings.HasPrefix(text, "{") {
			var raw map[string]string
			if err := json.Unmarshal([]byte(text), &raw); err != nil {
				return nil, &FieldError{Field: name, Reason: fmt.Sprintf("not a JSON object of strings: %v", err)}
			}
			for k, v := range raw {
				m[k] = v
			}
			return m, nil
		}
		for _, pair := range strings.Split(text, ",") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, &FieldError{Field: name, Reason: fmt.Sprintf("%q: want Name=value,Name2=value2 or a JSON object", truncate(text))}
			}
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		return m, nil
	default:
		return text, nil
	}
}
