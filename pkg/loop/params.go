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
	// MaxRateTTLTicks bounds a RATE item's lifetime in tick periods: how
	// long consumers may go on at a rate after the controller stopped.
	MaxRateTTLTicks = 10
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
	// Paused is true while an operator paused the loop (pause.go).
	Paused bool `json:"paused,omitempty"`
	// Mode is auto, manual or shadow; ManualRate is the rate in manual mode.
	Mode       Mode    `json:"mode"`
	ManualRate float64 `json:"manual_rate,omitempty"`
	// SignalName names the first signal, whose setpoint, controller, metric
	// and stale policy are the top-level fields ("" means DefaultSignal,
	// cpu). See signals.go.
	SignalName string `json:"signal,omitempty"`
	// Controls are the first signal's unit, setpoint and
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
	// DepthRetention is that queue's message retention period, against
	// which the tick's reason forecasts the oldest message's expiry; zero:
	// unknown, no forecast.
	DepthRetention time.Duration `json:"depth_retention,omitempty"`
	// Mapping is the SQS event source mapping the loop owns (esm_uuid):
	// the tick sets its MaximumConcurrency (mapping.go). Nil when none.
	Mapping *MappingConfig `json:"mapping,omitempty"`
	// Inner is the consumers' inner loop (inner_*, innerparams.go); nil
	// when off.
	Inner *InnerParams `json:"inner,omitempty"`
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
	// Member is the loop's membership of a destination whose rate it
	// shares (member.go); nil for a loop with its own controllers.
	Member *Member `json:"member,omitempty"`
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
	AttrMode             = "mode"
	AttrManualRate       = "manual_rate"
	AttrSetpoint         = "setpoint"
	attrKp               = "kp"
	attrKi               = "ki"
	attrAntiWindup       = "anti_windup"
	attrDelayAware       = "delay_aware"
	attrAdaptGain        = "adapt_gain"
	attrDrainFeedforward = "drain_feedforward"
	attrFFGain           = "ff_gain"
	attrFFBase           = "ff_base"
	attrFFTau            = "ff_tau"
	attrFFDeadTime       = "ff_dead_time"
	attrMinRate          = "min_rate"
	attrMaxRate          = "max_rate"
	attrTickPeriod       = "tick_period"
	attrRateTTL          = "rate_ttl"
	attrMetricSource     = "metric_source"
	attrStalePolicy      = "stale_policy"
	attrSafeRate         = "safe_rate"
	attrStaleDecay       = "stale_decay"
	attrStaleGrace       = "stale_grace"
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

// dynamoType is the kind's DynamoDB type.
func (k kind) dynamoType() string {
	return [...]string{kindNumber: "N", kindString: "S", kindDuration: "S", kindBool: "BOOL", kindStringMap: "M", kindNodes: "M", kindSignals: "M"}[k]
}

// short is the kind as the docs' table shows it.
func (k kind) short() string {
	return [...]string{kindNumber: "N", kindString: "S", kindDuration: "S duration", kindBool: "BOOL", kindStringMap: "M of S", kindNodes: "M of M", kindSignals: "M of M"}[k]
}

// retiredAttrs are attributes that no longer mean anything, each with the
// one value an item written before may hold (read and ignored) and why no
// other is valid.
var retiredAttrs = map[string][2]string{
	"direction": {"ceiling", "only ceiling is supported: a signal limits the rate while its measurement is above its setpoint; leave direction out"},
}

// retired reports whether name is a retired attribute.
func retired(name string) bool {
	_, ok := retiredAttrs[name]
	return ok
}

// retiredValues refuses a retired attribute that holds anything but the
// value it could hold.
func (d *decoder) retiredValues() {
	for _, name := range sortedKeys(d.attrs) {
		r, ok := retiredAttrs[name]
		if !ok {
			continue
		}
		if v, _ := d.attrs[name].(string); v != r[0] {
			d.fail(name, "%s: %s", describe(d.attrs[name]), r[1])
		}
	}
}

// ignoredAttrs are attributes of a PARAMS item that are not parameters.
var ignoredAttrs = map[string]bool{"pk": true, "sk": true, "updated_at": true, "updated_by": true, "updated_changes": true, "comment": true, AttrEditVersion: true}

// ParamInfo describes one PARAMS attribute as declared: for help texts,
// forms and docs.
type ParamInfo struct {
	// Name is the attribute's name; Type its DynamoDB type (N, S, BOOL, M).
	Name string
	Type string
	// Required is true for an attribute every item must have; PerSignal
	// for one each signal of `signals` may set too.
	Required  bool
	PerSignal bool
	// Unit, Default and Range are as the docs show them ("" when none).
	Unit    string
	Default string
	Range   string
	// Doc is the meaning, without markdown.
	Doc string
}

// Help is the attribute's description in one line: whether it is
// required, its type, meaning, unit and range.
func (i ParamInfo) Help() string {
	h := i.Doc
	if i.Required {
		h = "required; " + h
	}
	if i.Unit != "" {
		h += "; unit " + i.Unit
	}
	if i.Range != "" {
		h += "; range " + i.Range
	}
	return h
}

// ParamsAttributes returns the declared PARAMS attributes, the query
// attributes of sources included, sorted by name: for help texts and forms.
func ParamsAttributes(sources metric.Sources) []ParamInfo {
	sorted := slices.SortedFunc(slices.Values(paramsFor(sources)), func(a, b param) int { return strings.Compare(a.name, b.name) })
	out := make([]ParamInfo, len(sorted))
	for i, p := range sorted {
		out[i] = ParamInfo{Name: p.name, Type: p.kind.dynamoType(), Required: p.required, PerSignal: p.signal,
			Unit: p.unit, Default: strings.ReplaceAll(p.def, "`", ""), Range: p.rangeText(), Doc: p.kind.String() + ": " + p.plainDoc()}
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
		if _, ok := lookupParamIn(d.sources, name); !ok && !ignoredAttrs[name] && !retired(name) && !strings.HasPrefix(name, "x_") {
			field := name
			if strings.TrimSpace(field) == "" {
				field = strconv.Quote(name)
			}
			d.fail(field, "unknown attribute (names are snake_case, e.g. %s; prefix x_ for your own)", AttrSetpoint)
		}
	}
}

// params reads every declared attribute, in table order, without the
// checks across attributes.
func (d *decoder) params() Params {
	p := Params{Loop: d.loopID}
	member := d.present(AttrDestination) // a member needs only its own (member.go)
	for _, f := range paramTable {
		if f.required && !d.present(f.name) && (!member || memberAttrs[f.name]) {
			d.fail(f.name, "missing; required: %s", f.plainDoc())
		}
		if f.kind == kindSignals {
			p.Signals = d.decodeSignals(d.loopID)
			continue
		}
		f.decode(d, &p, f.name)
	}
	return p
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
	d.retiredValues()
	p := d.params()
	if p.Member != nil {
		d.memberOnly(p.Member.Destination)
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
		attrRateTTL:           {attrTickPeriod},
		attrMinRate:           {attrMaxRate},
		AttrManualRate:        {attrMinRate, attrMaxRate, AttrMode},
		attrSafeRate:          {attrMinRate, attrStalePolicy},
		attrKp:                {attrKi},
		attrESMMinConcurrency: {attrESMMaxConcurrency},
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
	if p.Member != nil {
		p.checkMember(fail) // the destination's checks are its own (member.go)
		return errs
	}
	p.checkMode(fail)
	p.checkGains(fail)
	p.checkRates(fail)
	p.checkMetric(sources, fail)
	p.checkStale(fail)
	p.checkNodes(sources, fail)
	p.checkMapping(fail)
	p.checkForeign(fail)
	p.checkPause(fail)
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
	p.checkBounds(fail)
	if p.Kp == 0 && p.Ki == 0 && p.Mode != ModeManual {
		fail(attrKp, "kp and ki are both 0: the controller would never move the rate")
	}
	switch p.AntiWindup {
	case control.AntiWindupNone, control.AntiWindupConditional, control.AntiWindupBackCalculation:
	default:
		fail(attrAntiWindup, "unknown scheme %q; want conditional, back-calculation or none", truncate(string(p.AntiWindup)))
	}
	if m := p.Feedforward; m != nil {
		if err := m.Validate(); err != nil {
			field := attrFFGain
			var fe *control.ModelFieldError
			if errors.As(err, &fe) {
				field = modelAttrs[fe.Field]
			}
			fail(field, "feedforward model: %v", err)
		}
	}
	if p.DelayAware && p.Feedforward == nil {
		fail(attrDelayAware, "the delay-aware integrator needs the feedforward model (ff_gain, ff_base, ff_tau, ff_dead_time)")
	}
	if p.AdaptGain && !p.DelayAware {
		fail(attrAdaptGain, "gain adaptation works in the delay-aware integrator: set delay_aware=true (and the feedforward model)")
	}
	if p.DrainFeedforward && (p.Unit != "s" || p.Feedforward != nil) {
		fail(attrDrainFeedforward, "the drain is measured for a replication lag, unit s, without a feedforward model (ff_gain); this signal's unit is %q%s", p.Unit, map[bool]string{true: " and it has a model"}[p.Feedforward != nil])
	}
}

// checkRates checks the rate bounds, the tick period and RATE's lifetime.
func (p Params) checkRates(fail failFunc) {
	if minOK, maxOK := finite(p.MinRate) && p.MinRate >= 0, finite(p.MaxRate) && p.MaxRate > 0; minOK && maxOK && p.MinRate >= p.MaxRate {
		fail(attrMinRate, "min_rate %v is not below max_rate %v", p.MinRate, p.MaxRate)
	}
	if p.RateTTL < p.TickPeriod {
		fail(attrRateTTL, "%v is shorter than the tick period %v: consumers would find the rate expired between ticks", p.RateTTL, p.TickPeriod)
	}
	if most := MaxRateTTLTicks * p.TickPeriod; p.TickPeriod > 0 && p.RateTTL > most {
		fail(attrRateTTL, "%v is longer than %d tick periods (%v): after the controller stops, consumers would keep a rate nothing watches that long", p.RateTTL, MaxRateTTLTicks, most)
	}
}

// checkStale checks the stale-metric policy.
func (p Params) checkStale(fail failFunc) {
	if err := p.StalePolicy().Validate(); err != nil {
		field := attrStalePolicy
		var fe *control.StaleFieldError
		if errors.As(err, &fe) {
			field = staleAttrs[fe.Field]
		}
		fail(field, "%v", err)
	}
}

// modelAttrs maps the fields of control.FOPDT onto their attributes.
var modelAttrs = map[string]string{"Gain": attrFFGain, "Tau": attrFFTau, "DeadTime": attrFFDeadTime, "Base": attrFFBase}

// staleAttrs maps the fields of control.StalePolicy onto their attributes.
var staleAttrs = map[string]string{"Action": attrStalePolicy, "DecayTime": attrStaleDecay, "SafeRate": attrSafeRate, "Grace": attrStaleGrace}

// ControlConfig returns the controller configuration for p.
func (p Params) ControlConfig() control.Config {
	var c control.Config
	for _, f := range paramTable {
		if f.config != nil {
			f.config(p, &c)
		}
	}
	// After a missed schedule a datapoint stands for at most three tick
	// periods of integration.
	c.MaxGap = 3 * p.TickPeriod
	c.MeasurementMin, c.MeasurementMax = p.measurementRange()
	if !p.percent() { // only a percentage has a ceiling to cut at
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
	if p.Member != nil {
		return a // a member has no metric (member.go)
	}
	encodeMetric(sources, p.Metric, len(p.Nodes) > 0, a)
	if m, ok := a[attrSignals].(map[string]any); ok {
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
		if f.kind == kindSignals {
			encodeSignals(p, a, f.name)
			continue
		}
		if p.Member == nil || memberAttrs[f.name] {
			f.encode(p, a, f.name)
		}
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
	var v any
	var reason string
	switch s.kind {
	case kindNumber:
		v, reason = parseNumber(text)
	case kindBool:
		v, reason = parseBool(text)
	case kindSignals:
		v, reason = parseJSONMap[any](text, `{"lag": {"setpoint": 10, "kp": 20, ...}}`)
	case kindNodes:
		v, reason = parseJSONMap[map[string]string](text, `{"node": {"endpoint": "http://...", "metric": "..."}}`)
	case kindStringMap:
		v, reason = parseStringMap(text)
	default:
		v = text
	}
	if reason != "" {
		return nil, &FieldError{Field: name, Reason: reason}
	}
	return v, nil
}

// parseNumber reads an N attribute's text; reason says why it is not one.
func parseNumber(text string) (v any, reason string) {
	f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Sprintf("%q is not a finite number", truncate(text))
	}
	return f, ""
}

// parseBool reads a BOOL attribute's text.
func parseBool(text string) (v any, reason string) {
	b, err := strconv.ParseBool(strings.TrimSpace(text))
	if err != nil {
		return nil, fmt.Sprintf("%q is not true or false", truncate(text))
	}
	return b, ""
}

// parseJSONMap reads a JSON object whose values are Vs into the map
// DecodeParams reads; example shows the expected shape in the reason.
func parseJSONMap[V any](text, example string) (v any, reason string) {
	var raw map[string]V
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Sprintf("not a JSON object %s: %v", example, err)
	}
	return toAttrValue(raw), ""
}

// toAttrValue turns maps of typed values into the map[string]any of a
// DynamoDB item.
func toAttrValue(v any) any {
	switch x := v.(type) {
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, s := range x {
			m[k] = s
		}
		return m
	case map[string]map[string]string:
		m := make(map[string]any, len(x))
		for k, s := range x {
			m[k] = toAttrValue(s)
		}
		return m
	case map[string]any:
		return x
	}
	return v
}

// parseStringMap reads metric_dimensions: a JSON object of strings or
// Name=value,Name2=value2.
func parseStringMap(text string) (v any, reason string) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "{") {
		var raw map[string]string
		if err := json.Unmarshal([]byte(text), &raw); err != nil {
			return nil, fmt.Sprintf("not a JSON object of strings: %v", err)
		}
		return toAttrValue(raw), ""
	}
	m := map[string]any{}
	for _, pair := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Sprintf("%q: want Name=value,Name2=value2 or a JSON object", truncate(text))
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m, ""
}
