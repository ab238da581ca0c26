package loop

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// param declares one PARAMS attribute, once: its name, its DynamoDB type,
// whether it is required, its default and meaning as an operator reads them,
// and how it is read into Params and written back. DecodeParams,
// Params.Attrs, ParamsAttributes, ParseParamValue (so `sluice params` and the
// dashboard's form) and the parameter table of docs/controller.md
// (ParamsMarkdown) all come from paramTable. Adding a parameter means adding
// its entry here, its field to Params (to Controls or Sensing, and its name
// to signalAttrs, when each signal has its own), and the code that uses it.
type param struct {
	name     string
	kind     kind
	required bool
	// def is the default as the docs show it (markdown).
	def string
	// doc is the meaning (markdown: `code` in backquotes).
	doc string
	codec
}

// codec reads an attribute into Params and writes it back.
type codec struct {
	// decode reads the attribute into p (its default when absent). Entries
	// are decoded in table order, so a default may depend on an earlier entry.
	decode func(d *decoder, p *Params, name string)
	// encode writes p's value of the attribute into a, or nothing when the
	// attribute is omitted for p.
	encode func(p Params, a map[string]any, name string)
}

// plainDoc is the meaning without markdown, for help texts and refusals.
func (p param) plainDoc() string { return strings.ReplaceAll(p.doc, "`", "") }

// lookupParam returns the declaration of an attribute.
func lookupParam(name string) (param, bool) {
	i := slices.IndexFunc(paramTable, func(p param) bool { return p.name == name })
	if i < 0 {
		return param{}, false
	}
	return paramTable[i], true
}

// paramTable is every PARAMS attribute, in decoding order.
var paramTable = []param{
	{AttrEnabled, kindBool, false, "true", "false: the controller skips the loop",
		boolean(func(p *Params) *bool { return &p.Enabled }, true, always)},
	{AttrMode, kindString, false, "`auto`", "`auto`, `manual` (writes `manual_rate`) or `shadow` (computes and records the rate in STATE, never writes RATE)",
		text(func(p *Params) *string { return (*string)(&p.Mode) }, string(ModeAuto), always)},
	{AttrManualRate, kindNumber, false, "required in manual", "rate in manual mode, messages/s, within [`min_rate`, `max_rate`]",
		manualRate},
	{AttrSignal, kindString, false, "`cpu`", "name of the signal the top-level metric, setpoint, gains and stale attributes describe (`[a-z0-9_-]{1,32}`); further signals go in `signals`",
		text(func(p *Params) *string { return &p.SignalName }, "", unlessZero)},
	{AttrUnit, kindString, false, "`%` (top level), none (in `signals`)", "the signal's unit as shown (`%`, `s`, `ms`); a signal in `%` must measure in [0, 100] and has the `ceiling` cut, any other only >= 0",
		text(func(p *Params) *string { return &p.Unit }, "", unlessZero)},
	{AttrDirection, kindString, false, "`ceiling`", "`ceiling`: above its setpoint the signal lowers the rate (CPU, lag, latency); the only direction supported",
		text(func(p *Params) *string { return (*string)(&p.Direction) }, "", unlessZero)},
	{AttrSetpoint, kindNumber, true, "required", "value to hold: for a signal in `%` (CPU utilization) in (0, 100], else > 0 in its unit",
		number(func(p *Params) *float64 { return &p.Setpoint }, 0, always)},
	{AttrKp, kindNumber, true, "required", "proportional gain, (msg/s) per point of CPU, >= 0",
		number(func(p *Params) *float64 { return &p.Kp }, 0, always)},
	{AttrKi, kindNumber, false, "0", "integral gain, (msg/s) per point-second (Kp/Ti), >= 0",
		number(func(p *Params) *float64 { return &p.Ki }, 0, always)},
	{AttrKd, kindNumber, false, "0", "derivative gain on the measurement, msg per point ((msg/s)·s per point; Kp·Td), >= 0",
		number(func(p *Params) *float64 { return &p.Kd }, 0, always)},
	{AttrDerivativeFilter, kindDuration, false, "0", "time constant of the derivative's first-order filter",
		duration(func(p *Params) *time.Duration { return &p.DerivativeFilter }, 0, unlessZero)},
	{AttrAntiWindup, kindString, false, "`conditional`", "`conditional` (the integrator never holds more than puts the rate at a bound), `back-calculation` or `none`",
		antiWindup},
	{AttrTrackingTime, kindDuration, false, "Kp/Ki", "back-calculation tracking time",
		duration(func(p *Params) *time.Duration { return &p.TrackingTime }, 0, unlessZero)},
	{AttrSetpointFilter, kindDuration, false, "0", "time constant of the first-order setpoint filter",
		duration(func(p *Params) *time.Duration { return &p.SetpointFilter }, 0, unlessZero)},
	{AttrDelayAware, kindBool, false, "false", "the integrator predicts the effect of rate changes the metric cannot show yet (needs `ff_gain`); Ki may then be tuned for the delay-free loop (`sluice tune`)",
		boolean(func(p *Params) *bool { return &p.DelayAware }, false, unlessZero)},
	{AttrAdaptGain, kindBool, false, "false", "the delay-aware integrator re-identifies the plant's gain online from its datapoints (a load from outside cancels out) and, once it is more than 30 % off the model, corrects the feedforward, the prediction and Ki with it, without a jump in the rate (needs `delay_aware`): for a plant whose gain drifts (docs/tuning.md)",
		boolean(func(p *Params) *bool { return &p.AdaptGain }, false, unlessZero)},
	{AttrDrainFeedforward, kindBool, false, "false", "for a replication lag (a signal in `signals`, unit s, without `ff_gain`): the controller measures the replica's pace, the writes it applied between two readings (those the primary took between the two instants a lag before them, from the rates applied) over the time between them, averaged over 30 s, and adds it to its output, so that its gains only correct what the measure misses and it takes over from the replica's pace ([signals](#signals-override-control))",
		boolean(func(p *Params) *bool { return &p.DrainFeedforward }, false, unlessZero)},
	{AttrNoiseBand, kindNumber, false, "0 (off)", "errors within this band, points of CPU, are integrated slowly (about 3× the metric's noise)",
		number(func(p *Params) *float64 { return &p.NoiseBand }, 0, unlessZero)},
	{AttrDemandHeadroom, kindNumber, false, "0.5", "while the consumers take clearly less than allowed (an empty queue), the rate is held at most at what they took × (1 + this), or at the controller's estimate of the setpoint's rate (FF + I) if higher, so that a burst starts there and not at `max_rate`; needs consumers that report (`SLUICE_REPORT`); 0: off",
		number(func(p *Params) *float64 { return &p.DemandHeadroom }, DefaultDemandHeadroom, always)},
	{AttrCeiling, kindNumber, false, "95", "a new datapoint at or above this CPU, percent, and above the setpoint cuts the rate at once to what the model says the destination takes at the setpoint (the measurement is pinned and hides the overload); 0: off",
		number(func(p *Params) *float64 { return &p.Ceiling }, DefaultCeiling, always)},
	{AttrFFGain, kindNumber, false, "none", "feedforward model gain, points of CPU per message/s, > 0, not so small that 1/`ff_gain` or `ff_base`/`ff_gain` overflows; its presence enables reference feedforward",
		ffGain},
	{AttrFFBase, kindNumber, false, "0", "model base load, percent",
		ffNumber(func(m *control.FOPDT) *float64 { return &m.Base })},
	{AttrFFTau, kindDuration, false, "0", "model time constant",
		ffDuration(func(m *control.FOPDT) *time.Duration { return &m.Tau })},
	{AttrFFDeadTime, kindDuration, false, "0", "model (plant) dead time",
		ffDuration(func(m *control.FOPDT) *time.Duration { return &m.DeadTime })},
	{AttrMinRate, kindNumber, true, "required", "lowest rate, messages/s, >= 0",
		number(func(p *Params) *float64 { return &p.MinRate }, 0, always)},
	{AttrMaxRate, kindNumber, true, "required", "highest rate, messages/s, > `min_rate`",
		number(func(p *Params) *float64 { return &p.MaxRate }, 0, always)},
	{AttrSlewLimit, kindNumber, false, "0 (none)", "largest rate increase per tick, messages/s (decreases take effect at once)",
		number(func(p *Params) *float64 { return &p.SlewLimit }, 0, always)},
	{AttrTickPeriod, kindDuration, false, "`1m`", "interval between the loop's ticks (>= 1s; the schedule fires every minute, so shorter periods tick once a minute)",
		duration(func(p *Params) *time.Duration { return &p.TickPeriod }, DefaultTickPeriod, always)},
	{AttrRateTTL, kindDuration, false, "3 × `tick_period`", "lifetime of a RATE item; must be >= `tick_period`",
		rateTTL},
	{AttrMetricSource, kindString, false, "the first source", "the metric source, one of those the decoder is given; it declares, reads and checks the other `metric_*` attributes (metricparams.go)",
		codec{(*decoder).decodeMetric, func(Params, map[string]any, string) {}}}, // with Attrs' sources
	{AttrStalePolicy, kindString, false, "`hold`", "`hold`, `decay` or `fail-closed`: what the loop does while its metric is stale or missing",
		text(func(p *Params) *string { return (*string)(&p.Stale.Action) }, string(control.StaleHold), always)},
	{AttrSafeRate, kindNumber, false, "`min_rate`", "the rate `decay` moves toward, messages/s (the rate stays within [`min_rate`, `max_rate`])",
		safeRate},
	{AttrStaleDecay, kindDuration, false, "`5m`", "time constant of `decay`",
		duration(func(p *Params) *time.Duration { return &p.Stale.DecayTime }, 5*time.Minute, always)},
	{AttrStaleGrace, kindDuration, false, "0", "how long a stale metric only holds the rate before the policy acts",
		duration(func(p *Params) *time.Duration { return &p.Stale.Grace }, 0, always)},
	{AttrStaleAfter, kindDuration, false, "`5m`", "age (after its period ended) beyond which the newest datapoint is stale",
		duration(func(p *Params) *time.Duration { return &p.StaleAfter }, DefaultStaleAfter, always)},
	{AttrDepthQueue, kindString, false, "none", "name of the SQS queue whose depth (`AWS/SQS` `ApproximateNumberOfMessagesVisible`, Maximum) the controller reads in one CloudWatch batch per tick for the dashboard's depth chart",
		text(func(p *Params) *string { return &p.DepthQueue }, "", unlessZero)},
	{AttrESMUUID, kindString, false, "none", "UUID of the SQS event source mapping of the loop's consumer Lambda: the controller then sets its `MaximumConcurrency` from the allowed rate and the consumers' measured batch time (the coarse actuator; the pacer in each instance holds the rate); absent: the loop owns no mapping (ECS worker, Kafka)",
		esmUUID},
	{AttrESMUpdateInterval, kindDuration, false, "`5m`", "least time between two updates of the mapping (a failed update is retried after it); needs `esm_uuid`",
		esmUpdateInterval},
	{AttrESMMinConcurrency, kindNumber, false, "2", "lowest `MaximumConcurrency` the controller sets, a whole number in 2..1000; needs `esm_uuid`",
		esmConcurrency(func(m *MappingConfig) *int { return &m.Min }, MinMappingConcurrency)},
	{AttrESMMaxConcurrency, kindNumber, false, "1000", "highest `MaximumConcurrency` the controller sets, a whole number in 2..1000, >= `esm_min_concurrency`; needs `esm_uuid`",
		esmConcurrency(func(m *MappingConfig) *int { return &m.Max }, MaxMappingConcurrency)},
	{AttrNodes, kindNodes, false, "none", "the destination's nodes for the balancer: node name → `{\"endpoint\": S, \"metric\": S}`. `endpoint` is the URL the consumers' HTTP sink posts to (RATE's `weights` are keyed by it; unique per node); `metric` is the node's CloudWatch dimensions (`Name=value[,Name2=value2]`, merged over `metric_dimensions`, or a bare value for its single dimension, `DBInstanceIdentifier` when there is none) or, with `metric_source` `prometheus`, the node's PromQL. At most 100 nodes",
		nodes},
	{AttrRegulate, kindString, false, "`max`", "with nodes: what the rate loop holds at `setpoint`, `max` (the hottest node with a fresh metric) or `mean`",
		text(func(p *Params) *string { return (*string)(&p.Regulate) }, "", unlessZero)},
	{AttrBalanceKp, kindNumber, false, "0.3", "balancer proportional gain, per unit of relative error, >= 0",
		balanceNumber(func(c *balance.Config) *float64 { return &c.ProportionalGain })},
	{AttrBalanceKi, kindNumber, false, "6 / `tick_period` s", "balancer integral gain per second, > 0 (0.4 of the relative error per tick: 0.1 at the 1 min default)",
		balanceNumber(func(c *balance.Config) *float64 { return &c.IntegralGain })},
	{AttrBalanceMinShare, kindNumber, false, "0.01", "lowest node weight, a multiple of the equal share 1/N, in (0, 1]",
		balanceNumber(func(c *balance.Config) *float64 { return &c.MinShare })},
	{AttrBalanceMaxShare, kindNumber, false, "8", "highest node weight, a multiple of the equal share 1/N, >= 1",
		balanceNumber(func(c *balance.Config) *float64 { return &c.MaxShare })},
	{AttrBalanceMinMean, kindNumber, false, "1", "fleet mean utilization, percent, below which the weights are held",
		balanceNumber(func(c *balance.Config) *float64 { return &c.MinMean })},
	{AttrSignals, kindSignals, false, "none", "further signals (override control): signal name (`[a-z0-9_-]{1,32}`, at most 8 signals in all) → a map of its own `setpoint` and `kp` (required), `unit`, `direction`, `ki`, `kd`, `derivative_filter`, `noise_band`, `setpoint_filter`, `anti_windup`, `tracking_time`, `delay_aware`, `drain_feedforward`, `ff_*`, `metric_*` and `stale_policy`, `stale_decay`, `stale_grace`, `stale_after`, meaning what they mean at the top level. Each signal has its own controller; the rate is the lowest output, the others track it; a stale signal follows its own policy, and the loop fails closed to `min_rate` if the signal limiting the rate goes stale",
		codec{}}, // set by signals.go's init
	{AttrExperiment, kindString, false, "none", "a guarded experiment (`sluice tune --experiment`, the dashboard's button): `id=ID,step=POINTS,abort_above=LEVEL,max_duration=DURATION[,max_rate_step=RATE]`. Once per `id`, the setpoint is offset by `step` (at most 20 points) for `max_duration` (at most 24h), the rate stays within `max_rate_step` of the rate before it; the first fresh datapoint at or above `abort_above` aborts it at once, back to the setpoint and the rate before it (bumpless); a stale metric ends it. Bounds, slew limit and stale policy stay in force; its progress is in STATE (`experiment`)",
		experimentCodec},
}

// omit says whether an attribute is left out of the item for its value.
type omit bool

const (
	always     omit = false // always written
	unlessZero omit = true  // left out at its zero value
)

// field is the codec of the Params field f points to: read reads it (def
// when absent) and write gives its value in the item, left out at its zero
// value when o says so.
func field[T comparable](f func(*Params) *T, read func(d *decoder, name string, def T) T, write func(T) any, def T, o omit) codec {
	return codec{
		func(d *decoder, p *Params, name string) { *f(p) = read(d, name, def) },
		func(p Params, a map[string]any, name string) {
			var zero T
			if v := *f(&p); v != zero || o == always {
				a[name] = write(v)
			}
		},
	}
}

// asIs writes a value as it is: numbers, strings and booleans.
func asIs[T any](v T) any { return v }

// durationText writes a duration as the text DynamoDB keeps ("1m30s").
func durationText(v time.Duration) any { return v.String() }

func number(f func(*Params) *float64, def float64, o omit) codec {
	return field(f, (*decoder).number, asIs[float64], def, o)
}

func text(f func(*Params) *string, def string, o omit) codec {
	return field(f, (*decoder).str, asIs[string], def, o)
}

func duration(f func(*Params) *time.Duration, def time.Duration, o omit) codec {
	return field(f, (*decoder).duration, durationText, def, o)
}

func boolean(f func(*Params) *bool, def bool, o omit) codec {
	return field(f, (*decoder).boolean, asIs[bool], def, o)
}

// The attributes whose default or presence depends on other attributes.

var manualRate = codec{
	func(d *decoder, p *Params, name string) { p.ManualRate = d.number(name, 0) },
	func(p Params, a map[string]any, name string) {
		if p.Mode == ModeManual || p.ManualRate != 0 {
			a[name] = p.ManualRate
		}
	},
}

// antiWindup: "none" in the item is control.AntiWindupNone ("").
var antiWindup = codec{
	func(d *decoder, p *Params, name string) {
		aw := d.str(name, string(control.AntiWindupConditional))
		if aw == "none" {
			aw = string(control.AntiWindupNone)
		}
		p.AntiWindup = control.AntiWindup(aw)
	},
	func(p Params, a map[string]any, name string) {
		aw := string(p.AntiWindup)
		if aw == "" {
			aw = "none"
		}
		a[name] = aw
	},
}

// feedforwardAttrs are the attributes of the feedforward model: any of them
// enables it, and then ff_gain is required.
var feedforwardAttrs = []string{AttrFFGain, AttrFFBase, AttrFFTau, AttrFFDeadTime}

// model returns p's feedforward model, created when the item has any of its
// attributes; nil otherwise.
func (d *decoder) model(p *Params) *control.FOPDT {
	if p.Feedforward == nil && slices.ContainsFunc(feedforwardAttrs, d.present) {
		p.Feedforward = &control.FOPDT{}
	}
	return p.Feedforward
}

var ffGain = codec{
	func(d *decoder, p *Params, name string) {
		m := d.model(p)
		if m == nil {
			return
		}
		if !d.present(name) {
			d.fail(name, "missing; feedforward attributes (ff_base, ff_tau, ff_dead_time) need the model gain")
		}
		m.Gain = d.number(name, 0)
	},
	func(p Params, a map[string]any, name string) {
		if p.Feedforward != nil {
			a[name] = p.Feedforward.Gain
		}
	},
}

// ffField is the codec of the feedforward model's field f points to (0
// when absent), read and written as field's are.
func ffField[T any](f func(*control.FOPDT) *T, read func(d *decoder, name string, def T) T, write func(T) any) codec {
	return codec{
		func(d *decoder, p *Params, name string) {
			if m := d.model(p); m != nil {
				var zero T
				*f(m) = read(d, name, zero)
			}
		},
		func(p Params, a map[string]any, name string) {
			if p.Feedforward != nil {
				a[name] = write(*f(p.Feedforward))
			}
		},
	}
}

func ffNumber(f func(*control.FOPDT) *float64) codec {
	return ffField(f, (*decoder).number, asIs[float64])
}

func ffDuration(f func(*control.FOPDT) *time.Duration) codec {
	return ffField(f, (*decoder).duration, durationText)
}

// rateTTL defaults to DefaultRateTTLTicks tick periods (when the tick period
// itself decoded).
var rateTTL = codec{
	func(d *decoder, p *Params, name string) {
		p.RateTTL = d.duration(name, 0)
		if !d.present(name) && !d.failed(AttrTickPeriod) {
			p.RateTTL = DefaultRateTTLTicks * p.TickPeriod
		}
	},
	func(p Params, a map[string]any, name string) { a[name] = p.RateTTL.String() },
}

// safeRate defaults to min_rate.
var safeRate = codec{
	func(d *decoder, p *Params, name string) {
		p.Stale.SafeRate = d.number(name, math.NaN())
		if math.IsNaN(p.Stale.SafeRate) {
			p.Stale.SafeRate = p.MinRate
		}
	},
	func(p Params, a map[string]any, name string) { a[name] = p.Stale.SafeRate },
}

var nodes = codec{
	func(d *decoder, p *Params, _ string) { p.Nodes = d.decodeNodes() },
	func(p Params, a map[string]any, name string) {
		if len(p.Nodes) == 0 {
			return
		}
		m := make(map[string]any, len(p.Nodes))
		for _, n := range p.Nodes {
			m[n.Name] = map[string]any{"endpoint": n.Endpoint, "metric": n.Metric}
		}
		a[name] = m
	},
}

// balanceAttrs are the balancer's attributes: any of them sets
// Params.Balance, the others taking their defaults.
var balanceAttrs = []string{AttrBalanceKp, AttrBalanceKi, AttrBalanceMinShare, AttrBalanceMaxShare, AttrBalanceMinMean}

func balanceNumber(f func(*balance.Config) *float64) codec {
	return codec{
		func(d *decoder, p *Params, name string) {
			if !slices.ContainsFunc(balanceAttrs, d.present) {
				return
			}
			def := DefaultBalanceConfig(p.TickPeriod)
			if p.Balance == nil {
				p.Balance = &def
			}
			*f(p.Balance) = d.number(name, *f(&def))
		},
		func(p Params, a map[string]any, name string) {
			if p.Balance != nil {
				a[name] = *f(p.Balance)
			}
		},
	}
}

// ParamsMarkdown returns the table of PARAMS attributes that
// docs/controller.md shows, with the query attributes of sources (a test
// keeps the doc current).
func ParamsMarkdown(sources metric.Sources) string {
	var b strings.Builder
	b.WriteString("| attribute | type | default | meaning |\n|---|---|---|---|\n")
	for _, p := range paramsFor(sources) {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", p.name, p.kind.short(), p.def, p.doc)
	}
	return b.String()
}
