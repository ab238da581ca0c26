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
	// Setpoint is the CPU utilization to hold, percent, in (0, 100].
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
	// Feedforward is the identified plant model for reference feedforward;
	// nil when none.
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
	// Metric is the measurement.
	Metric MetricQuery `json:"metric"`
	// Stale is what the loop does while its metric is stale or missing;
	// StaleAfter is the age (after the datapoint's period ends) beyond which
	// the newest datapoint is stale. For fail-closed the safe rate is MinRate.
	Stale      control.StalePolicy `json:"stale"`
	StaleAfter time.Duration       `json:"stale_after"`
	// Nodes are the destination's nodes for the balancer, sorted by name;
	// nil for a loop with one node (no balancing). See nodes.go.
	Nodes []Node `json:"nodes,omitempty"`
	// Balance is the balancer's configuration as edited; nil when no
	// balance_* attribute is set (BalanceConfig returns the defaults).
	Balance *balance.Config `json:"balance,omitempty"`
	// Regulate is what the rate loop of a loop with nodes holds at the
	// setpoint: max (the hottest node; "" means max) or mean.
	Regulate Regulate `json:"regulate,omitempty"`
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
	AttrNoiseBand        = "noise_band"
	AttrFFGain           = "ff_gain"
	AttrFFBase           = "ff_base"
	AttrFFTau            = "ff_tau"
	AttrFFDeadTime       = "ff_dead_time"
	AttrMinRate          = "min_rate"
	AttrMaxRate          = "max_rate"
	AttrSlewLimit        = "slew_limit"
	AttrTickPeriod       = "tick_period"
	AttrRateTTL          = "rate_ttl"
	AttrMetricSource     = "metric_source"
	AttrMetricNamespace  = "metric_namespace"
	AttrMetricName       = "metric_name"
	AttrMetricDimensions = "metric_dimensions"
	AttrMetricStatistic  = "metric_statistic"
	AttrMetricPeriod     = "metric_period"
	AttrMetricPromQL     = "metric_promql"
	AttrStalePolicy      = "stale_policy"
	AttrSafeRate         = "safe_rate"
	AttrStaleAfter       = "stale_after"
	AttrStaleDecay       = "stale_decay"
	AttrStaleGrace       = "stale_grace"
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
	default:
		return "a map of strings (M)"
	}
}

// paramsSchema lists every PARAMS attribute, its type and whether it is
// required.
var paramsSchema = map[string]struct {
	kind     kind
	required bool
	doc      string
}{
	AttrEnabled:          {kindBool, false, "false: the controller skips the loop (default true)"},
	AttrMode:             {kindString, false, "auto, manual or shadow (default auto)"},
	AttrManualRate:       {kindNumber, false, "rate in manual mode, messages/s (required in manual mode)"},
	AttrSetpoint:         {kindNumber, true, "CPU utilization to hold, percent, in (0, 100]"},
	AttrKp:               {kindNumber, true, "proportional gain, messages/s per point of CPU, >= 0"},
	AttrKi:               {kindNumber, false, "integral gain, messages/s per point-second, >= 0 (default 0)"},
	AttrKd:               {kindNumber, false, "derivative gain, messages per point, >= 0 (default 0)"},
	AttrDerivativeFilter: {kindDuration, false, "time constant of the derivative filter"},
	AttrAntiWindup:       {kindString, false, "conditional, back-calculation or none (default conditional)"},
	AttrTrackingTime:     {kindDuration, false, "back-calculation tracking time (default Kp/Ki)"},
	AttrSetpointFilter:   {kindDuration, false, "time constant of the setpoint filter"},
	AttrDelayAware:       {kindBool, false, "true: the integrator predicts the rate changes the metric cannot show yet (needs ff_gain; default false)"},
	AttrNoiseBand:        {kindNumber, false, "errors of this size, points of CPU, are integrated slowly (about 3x the metric's noise; default 0: off)"},
	AttrFFGain:           {kindNumber, false, "feedforward model gain, points of CPU per message/s, > 0 (enables feedforward)"},
	AttrFFBase:           {kindNumber, false, "feedforward model base load, percent"},
	AttrFFTau:            {kindDuration, false, "feedforward model time constant"},
	AttrFFDeadTime:       {kindDuration, false, "feedforward model dead time"},
	AttrMinRate:          {kindNumber, true, "lowest rate, messages/s, >= 0"},
	AttrMaxRate:          {kindNumber, true, "highest rate, messages/s, > min_rate"},
	AttrSlewLimit:        {kindNumber, false, "largest rate change per tick, messages/s (0: none)"},
	AttrTickPeriod:       {kindDuration, false, "interval between ticks, >= 1s (default 1m)"},
	AttrRateTTL:          {kindDuration, false, "lifetime of a RATE item (default 3 tick periods)"},
	AttrMetricSource:     {kindString, false, "cloudwatch or prometheus (default cloudwatch)"},
	AttrMetricNamespace:  {kindString, false, "CloudWatch namespace (default AWS/RDS)"},
	AttrMetricName:       {kindString, false, "CloudWatch metric name (default CPUUtilization)"},
	AttrMetricDimensions: {kindStringMap, false, "CloudWatch dimensions, e.g. {DBInstanceIdentifier: mydb} (required for cloudwatch unless nodes gives them per node)"},
	AttrMetricStatistic:  {kindString, false, "CloudWatch statistic (default Average)"},
	AttrMetricPeriod:     {kindDuration, false, "CloudWatch period, a multiple of 60s or 1s, 5s, 10s, 30s (default 60s)"},
	AttrMetricPromQL:     {kindString, false, "PromQL expression returning one series (required for prometheus unless nodes gives one per node)"},
	AttrStalePolicy:      {kindString, false, "hold, decay or fail-closed (default hold)"},
	AttrSafeRate:         {kindNumber, false, "rate that decay moves toward, messages/s (default min_rate)"},
	AttrStaleAfter:       {kindDuration, false, "age beyond which the newest datapoint is stale (default 5m)"},
	AttrStaleDecay:       {kindDuration, false, "time constant of the decay toward the safe rate (default 5m)"},
	AttrStaleGrace:       {kindDuration, false, "how long a stale metric holds the rate before the policy acts (default 0)"},
	AttrNodes: {kindNodes, false, "the destination's nodes for the balancer: name -> {endpoint: the URL the HTTP sink posts to (RATE's weights are keyed by it), " +
		"metric: the node's CloudWatch dimensions (Name=value[,Name=value], merged over metric_dimensions, or a bare value for its single dimension) or its PromQL}; at most 100"},
	AttrRegulate:        {kindString, false, "with nodes: what the rate loop holds at the setpoint, max (the hottest node with a fresh metric) or mean (default max)"},
	AttrBalanceKp:       {kindNumber, false, "balancer proportional gain, per unit of relative error, >= 0 (default 0.3)"},
	AttrBalanceKi:       {kindNumber, false, "balancer integral gain, per unit of relative error per second, > 0 (default 0.4 per tick: 6/tick_period in seconds)"},
	AttrBalanceMinShare: {kindNumber, false, "lowest node weight, a multiple of the equal share 1/N, in (0, 1] (default 0.01)"},
	AttrBalanceMaxShare: {kindNumber, false, "highest node weight, a multiple of the equal share 1/N, >= 1 (default 8)"},
	AttrBalanceMinMean:  {kindNumber, false, "fleet mean utilization, percent, below which weights are held (default 1)"},
}

// ignoredAttrs are attributes of a PARAMS item that are not parameters.
var ignoredAttrs = map[string]bool{"pk": true, "sk": true, "updated_at": true, "updated_by": true, "comment": true}

// ParamsAttributes returns the names of the PARAMS attributes with their
// documentation, sorted: for help texts and forms.
func ParamsAttributes() [][2]string {
	names := make([]string, 0, len(paramsSchema))
	for n := range paramsSchema {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([][2]string, len(names))
	for i, n := range names {
		s := paramsSchema[n]
		req := ""
		if s.required {
			req = "required; "
		}
		out[i] = [2]string{n, req + s.kind.String() + ": " + s.doc}
	}
	return out
}

// decoder collects field errors while reading attributes.
type decoder struct {
	attrs  map[string]any
	errs   []FieldError
	loopID string
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

func (d *decoder) present(name string) bool {
	_, ok := d.attrs[name]
	return ok
}

func (d *decoder) number(name string, def float64) float64 {
	v, ok := d.attrs[name]
	if !ok {
		if paramsSchema[name].required {
			d.fail(name, "missing; required: %s", paramsSchema[name].doc)
		}
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

func (d *decoder) str(name, def string) string {
	v, ok := d.attrs[name]
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		d.fail(name, "want %s, got %s", kindString, describe(v))
		return def
	}
	return s
}

func (d *decoder) duration(name string, def time.Duration) time.Duration {
	v, ok := d.attrs[name]
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		d.fail(name, "want %s, got %s", kindDuration, describe(v))
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
	v, ok := d.attrs[name]
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		d.fail(name, "want %s, got %s", kindBool, describe(v))
		return def
	}
	return b
}

func (d *decoder) stringMap(name string) map[string]string {
	v, ok := d.attrs[name]
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(name, "want %s, got %s", kindStringMap, describe(v))
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

// DecodeParams decodes and validates the attributes of a PARAMS item. The
// values are those of a DynamoDB item converted to Go: string (S), float64
// (N), bool (BOOL), map[string]any (M), []any (L) and nil (NULL); json.Number
// and int are accepted for numbers. A refusal is a *ParamsError that lists
// every problem with its attribute and reason.
func DecodeParams(loopID string, attrs map[string]any) (Params, error) {
	if attrs == nil {
		return Params{}, fmt.Errorf("loop %q: %w", loopID, ErrParamsMissing)
	}
	d := &decoder{attrs: attrs, loopID: loopID}
	for _, name := range sortedKeys(attrs) {
		if _, ok := paramsSchema[name]; !ok && !ignoredAttrs[name] && !strings.HasPrefix(name, "x_") {
			field := name
			if strings.TrimSpace(field) == "" {
				field = strconv.Quote(name)
			}
			d.fail(field, "unknown attribute (names are snake_case, e.g. %s; prefix x_ for your own)", AttrSetpoint)
		}
	}
	p := Params{Loop: loopID}
	p.Enabled = d.boolean(AttrEnabled, true)
	p.Mode = Mode(d.str(AttrMode, string(ModeAuto)))
	p.ManualRate = d.number(AttrManualRate, 0)
	p.Setpoint = d.number(AttrSetpoint, 0)
	p.Kp = d.number(AttrKp, 0)
	p.Ki = d.number(AttrKi, 0)
	p.Kd = d.number(AttrKd, 0)
	p.DerivativeFilter = d.duration(AttrDerivativeFilter, 0)
	aw := d.str(AttrAntiWindup, string(control.AntiWindupConditional))
	if aw == "none" {
		aw = string(control.AntiWindupNone)
	}
	p.AntiWindup = control.AntiWindup(aw)
	p.TrackingTime = d.duration(AttrTrackingTime, 0)
	p.SetpointFilter = d.duration(AttrSetpointFilter, 0)
	p.DelayAware = d.boolean(AttrDelayAware, false)
	p.NoiseBand = d.number(AttrNoiseBand, 0)
	if d.present(AttrFFGain) || d.present(AttrFFBase) || d.present(AttrFFTau) || d.present(AttrFFDeadTime) {
		if !d.present(AttrFFGain) {
			d.fail(AttrFFGain, "missing; feedforward attributes (ff_base, ff_tau, ff_dead_time) need the model gain")
		}
		p.Feedforward = &control.FOPDT{
			Gain:     d.number(AttrFFGain, 0),
			Base:     d.number(AttrFFBase, 0),
			Tau:      d.duration(AttrFFTau, 0),
			DeadTime: d.duration(AttrFFDeadTime, 0),
		}
	}
	p.MinRate = d.number(AttrMinRate, 0)
	p.MaxRate = d.number(AttrMaxRate, 0)
	p.SlewLimit = d.number(AttrSlewLimit, 0)
	p.TickPeriod = d.duration(AttrTickPeriod, DefaultTickPeriod)
	p.RateTTL = d.duration(AttrRateTTL, 0)
	p.Metric = MetricQuery{
		Source:     Source(d.str(AttrMetricSource, string(SourceCloudWatch))),
		Namespace:  d.str(AttrMetricNamespace, ""),
		Metric:     d.str(AttrMetricName, ""),
		Dimensions: d.stringMap(AttrMetricDimensions),
		Statistic:  d.str(AttrMetricStatistic, ""),
		Period:     d.duration(AttrMetricPeriod, 0),
		PromQL:     d.str(AttrMetricPromQL, ""),
	}
	if p.Metric.Source == SourceCloudWatch {
		// Absent attributes take the defaults: AWS/RDS CPUUtilization,
		// Average over 60 s.
		for _, f := range []struct {
			name string
			v    *string
			def  string
		}{{AttrMetricNamespace, &p.Metric.Namespace, DefaultNamespace}, {AttrMetricName, &p.Metric.Metric, DefaultMetric}, {AttrMetricStatistic, &p.Metric.Statistic, DefaultStatistic}} {
			if !d.present(f.name) {
				*f.v = f.def
			}
		}
		if !d.present(AttrMetricPeriod) {
			p.Metric.Period = DefaultPeriod
		}
	}
	p.Stale = control.StalePolicy{
		Action:    control.StaleAction(d.str(AttrStalePolicy, string(control.StaleHold))),
		SafeRate:  d.number(AttrSafeRate, math.NaN()),
		DecayTime: d.duration(AttrStaleDecay, 5*time.Minute),
		Grace:     d.duration(AttrStaleGrace, 0),
	}
	p.StaleAfter = d.duration(AttrStaleAfter, DefaultStaleAfter)
	p.Nodes = d.decodeNodes()
	p.Regulate = Regulate(d.str(AttrRegulate, ""))
	p.Balance = d.decodeBalance(p.TickPeriod)
	// Only values that decoded are checked further: one reason per field.
	bad := make(map[string]bool, len(d.errs))
	for _, e := range d.errs {
		bad[e.Field] = true
	}
	if !d.present(AttrRateTTL) && !bad[AttrTickPeriod] {
		p.RateTTL = DefaultRateTTLTicks * p.TickPeriod
	}
	if math.IsNaN(p.Stale.SafeRate) {
		p.Stale.SafeRate = p.MinRate
	}
	if p.Mode == ModeManual && !d.present(AttrManualRate) {
		d.fail(AttrManualRate, "missing; manual mode needs the rate to hold, messages/s")
		bad[AttrManualRate] = true
	}
	// A check across fields is left out when a field it compares with did
	// not decode: its reason would be about a default, not the edit.
	dependsOn := map[string][]string{
		AttrRateTTL:    {AttrTickPeriod},
		AttrMinRate:    {AttrMaxRate},
		AttrManualRate: {AttrMinRate, AttrMaxRate, AttrMode},
		AttrSafeRate:   {AttrMinRate, AttrStalePolicy},
		AttrKp:         {AttrKi},
	}
	for _, e := range p.check() {
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

// Validate reports whether p can drive a loop; a refusal is a *ParamsError.
func (p Params) Validate() error {
	if errs := p.check(); len(errs) > 0 {
		return &ParamsError{Loop: p.Loop, Fields: errs}
	}
	return nil
}

func (p Params) check() []FieldError {
	var errs []FieldError
	fail := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
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
	if !finite(p.Setpoint) || p.Setpoint <= 0 || p.Setpoint > 100 {
		fail(AttrSetpoint, "%v is outside (0, 100] percent", p.Setpoint)
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
			fail(AttrFFGain, "feedforward model: %v", err)
		}
	}
	if p.DelayAware && p.Feedforward == nil {
		fail(AttrDelayAware, "the delay-aware integrator needs the feedforward model (ff_gain, ff_base, ff_tau, ff_dead_time)")
	}
	if !finite(p.NoiseBand) || p.NoiseBand < 0 {
		fail(AttrNoiseBand, "%v must be a finite number >= 0", p.NoiseBand)
	}
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
	switch p.Metric.Source {
	case SourceCloudWatch:
		if p.Metric.Namespace == "" {
			fail(AttrMetricNamespace, "empty")
		}
		if p.Metric.Metric == "" {
			fail(AttrMetricName, "empty")
		}
		if p.Metric.Statistic == "" {
			fail(AttrMetricStatistic, "empty")
		}
		if len(p.Metric.Dimensions) == 0 && len(p.Nodes) == 0 {
			fail(AttrMetricDimensions, "missing; a CloudWatch metric needs its dimensions, e.g. {\"DBInstanceIdentifier\": \"mydb\"}")
		}
		if len(p.Metric.Dimensions) > 30 {
			fail(AttrMetricDimensions, "%d dimensions; CloudWatch allows 30", len(p.Metric.Dimensions))
		}
		if per := p.Metric.Period; per <= 0 || per%time.Second != 0 || (per%time.Minute != 0 && !slices.Contains([]time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}, per)) {
			fail(AttrMetricPeriod, "%v: CloudWatch periods are 1s, 5s, 10s, 30s or a multiple of 60s", per)
		}
	case SourcePrometheus:
		if strings.TrimSpace(p.Metric.PromQL) == "" && len(p.Nodes) == 0 {
			fail(AttrMetricPromQL, "missing; a prometheus metric needs a PromQL expression (or nodes, each with its own)")
		}
	default:
		fail(AttrMetricSource, "unknown source %q; want cloudwatch or prometheus", truncate(string(p.Metric.Source)))
	}
	stale := p.Stale
	if stale.Action == control.StaleFailClosed {
		stale.SafeRate = p.MinRate
	}
	if err := stale.Validate(); err != nil {
		field := AttrStalePolicy
		switch {
		case strings.Contains(err.Error(), "safe rate"):
			field = AttrSafeRate
		case strings.Contains(err.Error(), "decay time"):
			field = AttrStaleDecay
		case strings.Contains(err.Error(), "grace"):
			field = AttrStaleGrace
		}
		fail(field, "%v", err)
	}
	if p.StaleAfter <= 0 {
		fail(AttrStaleAfter, "%v must be positive", p.StaleAfter)
	}
	p.checkNodes(fail)
	return errs
}

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
		NoiseBand:        p.NoiseBand,
		MeasurementMin:   0,
		MeasurementMax:   100,
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
// types DecodeParams reads: DecodeParams(p.Loop, p.Attrs()) returns p.
func (p Params) Attrs() map[string]any {
	a := map[string]any{
		AttrEnabled:      p.Enabled,
		AttrMode:         string(p.Mode),
		AttrSetpoint:     p.Setpoint,
		AttrKp:           p.Kp,
		AttrKi:           p.Ki,
		AttrKd:           p.Kd,
		AttrMinRate:      p.MinRate,
		AttrMaxRate:      p.MaxRate,
		AttrSlewLimit:    p.SlewLimit,
		AttrTickPeriod:   p.TickPeriod.String(),
		AttrRateTTL:      p.RateTTL.String(),
		AttrStalePolicy:  string(p.Stale.Action),
		AttrSafeRate:     p.Stale.SafeRate,
		AttrStaleAfter:   p.StaleAfter.String(),
		AttrStaleDecay:   p.Stale.DecayTime.String(),
		AttrStaleGrace:   p.Stale.Grace.String(),
		AttrMetricSource: string(p.Metric.Source),
	}
	if p.Mode == ModeManual || p.ManualRate != 0 {
		a[AttrManualRate] = p.ManualRate
	}
	aw := string(p.AntiWindup)
	if aw == "" {
		aw = "none"
	}
	a[AttrAntiWindup] = aw
	if p.DerivativeFilter != 0 {
		a[AttrDerivativeFilter] = p.DerivativeFilter.String()
	}
	if p.TrackingTime != 0 {
		a[AttrTrackingTime] = p.TrackingTime.String()
	}
	if p.SetpointFilter != 0 {
		a[AttrSetpointFilter] = p.SetpointFilter.String()
	}
	if p.DelayAware {
		a[AttrDelayAware] = true
	}
	if p.NoiseBand != 0 {
		a[AttrNoiseBand] = p.NoiseBand
	}
	if m := p.Feedforward; m != nil {
		a[AttrFFGain] = m.Gain
		a[AttrFFBase] = m.Base
		a[AttrFFTau] = m.Tau.String()
		a[AttrFFDeadTime] = m.DeadTime.String()
	}
	switch p.Metric.Source {
	case SourcePrometheus:
		a[AttrMetricPromQL] = p.Metric.PromQL
	default:
		a[AttrMetricNamespace] = p.Metric.Namespace
		a[AttrMetricName] = p.Metric.Metric
		a[AttrMetricStatistic] = p.Metric.Statistic
		a[AttrMetricPeriod] = p.Metric.Period.String()
		dims := make(map[string]any, len(p.Metric.Dimensions))
		for k, v := range p.Metric.Dimensions {
			dims[k] = v
		}
		if p.Metric.Dimensions != nil || len(p.Nodes) == 0 {
			a[AttrMetricDimensions] = dims
		}
	}
	p.nodesAttrs(a)
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
// metric_dimensions either a JSON object or `Name=value,Name2=value2`. An
// unknown attribute or unparsable text is an error that says why.
func ParseParamValue(name, text string) (any, error) {
	s, ok := paramsSchema[name]
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
