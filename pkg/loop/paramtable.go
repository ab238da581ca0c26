package loop

import (
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

// param declares one PARAMS attribute, once, as Kubernetes declares an API
// field with its markers: its name, its DynamoDB type, whether it is
// required, whether each signal has its own (signal: top level for the first
// signal, and in the `signals` map for the others), its unit, default and
// range, its meaning as an operator reads it, and how it is read into Params,
// written back and copied into control.Config. DecodeParams, Params.Attrs,
// Params.Validate (the ranges), Params.ControlConfig, the attributes of a
// signal, ParamsAttributes, ParseParamValue (so `sluice params` and the
// dashboard's form) and the parameter table of docs/controller.md
// (ParamsMarkdown) all come from paramTable. Adding a parameter means adding
// its entry here, its field to Params (to Controls or Sensing when it is per
// signal), and the code that uses it; a rule across attributes is code in
// params.go (Params.check).
type param struct {
	name     string
	kind     kind
	required bool
	// signal is true for an attribute each signal has its own of.
	signal bool
	// unit is the value's unit as the docs show it ("" when none).
	unit string
	// def is the default as the docs show it (markdown).
	def string
	// bounds is the range of a number or a duration; nil: any.
	bounds *bounds
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
	// value returns p's value of the attribute, for its range; nil for an
	// attribute without a plain value.
	value func(p Params) any
	// config copies p's value into the controller's configuration; nil
	// for an attribute that is not a setting of control.Config as it is.
	config func(p Params, c *control.Config)
}

// markdown is the meaning as the docs show it: {per-signal} in the doc is
// the list of the attributes each signal has (param.signal), the required
// ones marked.
func (p param) markdown() string {
	if !strings.Contains(p.doc, "{per-signal}") {
		return p.doc
	}
	var names []string
	for _, f := range paramTable {
		if f.signal {
			names = append(names, "`"+f.name+"`"+map[bool]string{true: " (required)"}[f.required])
		}
	}
	return strings.ReplaceAll(p.doc, "{per-signal}", strings.Join(names, ", "))
}

// plainDoc is the meaning without markdown, for help texts and refusals.
func (p param) plainDoc() string { return strings.ReplaceAll(p.markdown(), "`", "") }

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
	{name: "enabled", kind: kindBool, def: "true",
		doc:   "false: the controller steps aside: it writes no RATE (the consumers run at their own safe rate once RATE expires) and leaves the mapping as it is; refused while `paused` (resume first). To stop consumption, pause",
		codec: boolean(func(p *Params) *bool { return &p.Enabled }, true, always)},
	{name: AttrPaused, kind: kindBool, def: "false",
		doc:   "true (`sluice pause`): the controller writes RATE 0 at every tick, turns the loop's event source mapping off (`esm_uuid`: nothing is received), and holds its controllers; the workers stop receiving and keep their leases. false again (`sluice resume`): the mapping is turned on and the controllers restart as on a first tick, from the model's rate",
		codec: boolean(func(p *Params) *bool { return &p.Paused }, false, unlessZero)},
	{name: AttrMode, kind: kindString, def: "`auto`",
		doc:   "`auto`, `manual` (writes `manual_rate`) or `shadow` (computes and records the rate in STATE, never writes RATE)",
		codec: text(func(p *Params) *string { return (*string)(&p.Mode) }, string(ModeAuto), always)},
	{name: AttrManualRate, kind: kindNumber, unit: "messages/s", def: "required in manual",
		doc:   "rate in manual mode, messages/s, within [`min_rate`, `max_rate`]",
		codec: manualRate},
	{name: attrSignal, kind: kindString, def: "`cpu`",
		doc:   "name of the signal the top-level metric, setpoint, gains and stale attributes describe (`[a-z0-9_-]{1,32}`); further signals go in `signals`",
		codec: text(func(p *Params) *string { return &p.SignalName }, "", unlessZero)},
	{name: "unit", kind: kindString, signal: true, def: "`%` (top level), none (in `signals`)",
		doc:   "the signal's unit as shown (`%`, `s`, `ms`); a signal in `%` must measure in [0, 100] and has the `ceiling` cut, any other only >= 0",
		codec: text(func(p *Params) *string { return &p.Unit }, "", unlessZero)},
	{name: AttrSetpoint, kind: kindNumber, required: true, signal: true, unit: "the signal's unit", def: "required",
		doc:   "value to hold: for a signal in `%` (CPU utilization) in (0, 100], else > 0 in its unit",
		codec: number(func(p *Params) *float64 { return &p.Setpoint }, 0, always)},
	{name: attrKp, kind: kindNumber, required: true, signal: true, unit: "messages/s per point", bounds: atLeast(0), def: "required",
		doc:   "proportional gain (per point of the signal's unit)",
		codec: number(func(p *Params) *float64 { return &p.Kp }, 0, always, func(c *control.Config) *float64 { return &c.Kp })},
	{name: attrKi, kind: kindNumber, signal: true, unit: "messages/s per point-second", bounds: atLeast(0), def: "0",
		doc:   "integral gain (Kp/Ti)",
		codec: number(func(p *Params) *float64 { return &p.Ki }, 0, always, func(c *control.Config) *float64 { return &c.Ki })},
	{name: "kd", kind: kindNumber, signal: true, unit: "messages per point", bounds: atLeast(0), def: "0",
		doc:   "derivative gain on the measurement (Kp·Td)",
		codec: number(func(p *Params) *float64 { return &p.Kd }, 0, always, func(c *control.Config) *float64 { return &c.Kd })},
	{name: "derivative_filter", kind: kindDuration, signal: true, bounds: atLeast(0), def: "0",
		doc:   "time constant of the derivative's first-order filter",
		codec: duration(func(p *Params) *time.Duration { return &p.DerivativeFilter }, 0, unlessZero, func(c *control.Config) *time.Duration { return &c.DerivativeFilter })},
	{name: attrAntiWindup, kind: kindString, signal: true, def: "`conditional`",
		doc:   "`conditional` (the integrator never holds more than puts the rate at a bound), `back-calculation` or `none`",
		codec: antiWindup},
	{name: "tracking_time", kind: kindDuration, signal: true, bounds: atLeast(0), def: "Kp/Ki",
		doc:   "back-calculation tracking time",
		codec: duration(func(p *Params) *time.Duration { return &p.TrackingTime }, 0, unlessZero, func(c *control.Config) *time.Duration { return &c.TrackingTime })},
	{name: "setpoint_filter", kind: kindDuration, signal: true, bounds: atLeast(0), def: "0",
		doc:   "time constant of the first-order setpoint filter",
		codec: duration(func(p *Params) *time.Duration { return &p.SetpointFilter }, 0, unlessZero, func(c *control.Config) *time.Duration { return &c.SetpointFilter })},
	{name: attrDelayAware, kind: kindBool, signal: true, def: "false",
		doc:   "the integrator predicts the effect of rate changes the metric cannot show yet (needs `ff_gain`); Ki may then be tuned for the delay-free loop (`sluice tune`)",
		codec: boolean(func(p *Params) *bool { return &p.DelayAware }, false, unlessZero, func(c *control.Config) *bool { return &c.DelayAware })},
	{name: attrAdaptGain, kind: kindBool, signal: true, def: "false",
		doc:   "the delay-aware integrator re-identifies the plant's gain online from its datapoints (a load from outside cancels out) and, once it is more than 30 % off the model, corrects the feedforward, the prediction and Ki with it, without a jump in the rate (needs `delay_aware`): for a plant whose gain drifts (docs/tuning.md)",
		codec: boolean(func(p *Params) *bool { return &p.AdaptGain }, false, unlessZero, func(c *control.Config) *bool { return &c.AdaptGain })},
	{name: attrDrainFeedforward, kind: kindBool, signal: true, def: "false",
		doc:   "for a replication lag (a signal in `signals`, unit s, without `ff_gain`): the controller measures the replica's pace, the writes it applied between two readings (those the primary took between the two instants a lag before them, from the rates applied) over the time between them, averaged over 30 s, and adds it to its output, so that its gains only correct what the measure misses and it takes over from the replica's pace ([signals](#signals-override-control))",
		codec: boolean(func(p *Params) *bool { return &p.DrainFeedforward }, false, unlessZero)},
	{name: "noise_band", kind: kindNumber, signal: true, unit: "points", bounds: atLeast(0), def: "0 (off)",
		doc:   "errors within this band are integrated slowly (about 3× the metric's noise)",
		codec: number(func(p *Params) *float64 { return &p.NoiseBand }, 0, unlessZero, func(c *control.Config) *float64 { return &c.NoiseBand })},
	{name: "demand_headroom", kind: kindNumber, bounds: within(0, 100), def: "0.5",
		doc:   "while the consumers take clearly less than allowed (an empty queue), the rate is held at most at what they took × (1 + this), or at the controller's estimate of the setpoint's rate (FF + I) if higher, so that a burst starts there and not at `max_rate`; needs consumers that report (`SLUICE_REPORT`); 0: off",
		codec: number(func(p *Params) *float64 { return &p.DemandHeadroom }, DefaultDemandHeadroom, always, func(c *control.Config) *float64 { return &c.DemandConfig.Headroom })},
	{name: "ceiling", kind: kindNumber, unit: "%", bounds: within(0, 100), def: "95",
		doc:   "a new datapoint at or above this CPU, percent, and above the setpoint cuts the rate at once to what the model says the destination takes at the setpoint (the measurement is pinned and hides the overload); 0: off",
		codec: number(func(p *Params) *float64 { return &p.Ceiling }, DefaultCeiling, always, func(c *control.Config) *float64 { return &c.DemandConfig.Ceiling })},
	{name: attrFFGain, kind: kindNumber, signal: true, unit: "points per message/s", def: "none",
		doc:   "feedforward model gain, points of CPU per message/s, > 0, not so small that 1/`ff_gain` or `ff_base`/`ff_gain` overflows; its presence enables reference feedforward",
		codec: ffGain},
	{name: attrFFBase, kind: kindNumber, signal: true, unit: "%", def: "0",
		doc:   "model base load, percent",
		codec: ffNumber(func(m *control.FOPDT) *float64 { return &m.Base })},
	{name: attrFFTau, kind: kindDuration, signal: true, def: "0",
		doc:   "model time constant",
		codec: ffDuration(func(m *control.FOPDT) *time.Duration { return &m.Tau })},
	{name: attrFFDeadTime, kind: kindDuration, signal: true, def: "0",
		doc:   "model (plant) dead time",
		codec: ffDuration(func(m *control.FOPDT) *time.Duration { return &m.DeadTime })},
	{name: attrMinRate, kind: kindNumber, required: true, unit: "messages/s", bounds: atLeast(0), def: "required",
		doc:   "lowest rate",
		codec: number(func(p *Params) *float64 { return &p.MinRate }, 0, always, func(c *control.Config) *float64 { return &c.Min })},
	{name: attrMaxRate, kind: kindNumber, required: true, unit: "messages/s", bounds: above(0), def: "required",
		doc:   "highest rate, > `min_rate`",
		codec: number(func(p *Params) *float64 { return &p.MaxRate }, 0, always, func(c *control.Config) *float64 { return &c.Max })},
	{name: "slew_limit", kind: kindNumber, unit: "messages/s", bounds: atLeast(0), def: "0 (none)",
		doc:   "largest rate increase per tick, messages/s (decreases take effect at once)",
		codec: number(func(p *Params) *float64 { return &p.SlewLimit }, 0, always, func(c *control.Config) *float64 { return &c.Slew })},
	{name: attrTickPeriod, kind: kindDuration, bounds: atLeast(1), def: "`1m`",
		doc:   "interval between the loop's ticks (the schedule fires every minute, so shorter periods tick once a minute)",
		codec: duration(func(p *Params) *time.Duration { return &p.TickPeriod }, DefaultTickPeriod, always)},
	{name: attrRateTTL, kind: kindDuration, def: "3 × `tick_period`",
		doc:   "lifetime of a RATE item; must be >= `tick_period` and <= 10 × `tick_period`",
		codec: rateTTL},
	{name: attrMetricSource, kind: kindString, signal: true, def: "the first source",
		doc:   "the metric source, one of those the decoder is given; it declares, reads and checks the other `metric_*` attributes (metricparams.go)",
		codec: codec{decode: (*decoder).decodeMetric, encode: func(Params, map[string]any, string) {}}}, // with Attrs' sources
	{name: attrStalePolicy, kind: kindString, signal: true, def: "`hold`",
		doc:   "`hold`, `decay` or `fail-closed`: what the loop does while its metric is stale or missing",
		codec: text(func(p *Params) *string { return (*string)(&p.Stale.Action) }, string(control.StaleHold), always)},
	{name: attrSafeRate, kind: kindNumber, unit: "messages/s", def: "`min_rate`",
		doc:   "the rate `decay` moves toward, messages/s (the rate stays within [`min_rate`, `max_rate`])",
		codec: safeRate},
	{name: attrStaleDecay, kind: kindDuration, signal: true, def: "`5m`",
		doc:   "time constant of `decay`",
		codec: duration(func(p *Params) *time.Duration { return &p.Stale.DecayTime }, 5*time.Minute, always)},
	{name: attrStaleGrace, kind: kindDuration, signal: true, def: "0",
		doc:   "how long a stale metric only holds the rate before the policy acts",
		codec: duration(func(p *Params) *time.Duration { return &p.Stale.Grace }, 0, always)},
	{name: "stale_after", kind: kindDuration, signal: true, bounds: above(0), def: "`5m`",
		doc:   "age (after its period ended) beyond which the newest datapoint is stale",
		codec: duration(func(p *Params) *time.Duration { return &p.StaleAfter }, DefaultStaleAfter, always)},
	{name: attrInnerLoop, kind: kindBool, def: "false",
		doc:   "true: the consumers run the inner loop on their sink's latency per message, which may cut their pace below their share within seconds when the destination slows down, never raise it ([the inner loop](consumers.md#the-inner-loop))",
		codec: innerLoop},
	{name: attrInnerTolerance, kind: kindNumber, bounds: within(0.01, 10), def: "0.2",
		doc:   "the inner loop cuts when the latency rises this much, relative to the latency it learned at the setpoint (needs `inner_loop`)",
		codec: innerTolerance},
	{name: attrInnerTrip, kind: kindNumber, bounds: within(0.01, 10), def: "`inner_tolerance`",
		doc:   "the inner loop cuts when the latency rises this much instead, while `inner_tolerance` still judges how steady the share is: on a destination that queues like one server at setpoint u (a fraction), setpoint + 5 points is a rise of 0.05/(0.95-u), 0.077 at a 30 % setpoint (needs `inner_loop`; [the trip](consumers.md#the-inner-loop-seconds-not-minutes))",
		codec: innerTrip},
	{name: attrInnerReactionTime, kind: kindDuration, bounds: within(1, 3600), def: "`20s`",
		doc:   "the inner loop's integral time: about the destination's dead time plus lag, as a step test shows them (needs `inner_loop`)",
		codec: innerReactionTime},
	{name: "depth_queue", kind: kindString, def: "none",
		doc:   "name of the SQS queue whose depth (`AWS/SQS` `ApproximateNumberOfMessagesVisible`, Maximum) the controller reads in one CloudWatch batch per tick for the dashboard's depth chart and the drain forecast of the tick's reason",
		codec: text(func(p *Params) *string { return &p.DepthQueue }, "", unlessZero)},
	{name: attrDepthRetention, kind: kindDuration, bounds: retentionBounds(), def: "unknown",
		doc:   "the `depth_queue`'s `MessageRetentionPeriod` (SQS's default is `96h`; the template's `QueueRetentionPeriod` defaults to `336h`): when the oldest message (`AWS/SQS` `ApproximateAgeOfOldestMessage`, read in the depth's batch) would expire before the backlog drains at the allowed rate, the tick's reason says so; absent: no such forecast",
		codec: depthRetention},
	{name: attrESMUUID, kind: kindString, def: "none",
		doc:   "UUID of the SQS event source mapping of the loop's consumer Lambda: the controller then sets its `MaximumConcurrency` from the allowed rate and the consumers' measured batch time (the coarse actuator; the pacer in each instance holds the rate); absent: the loop owns no mapping (ECS worker, Kafka)",
		codec: esmUUID},
	{name: attrESMKind, kind: kindString, def: "`sqs`",
		doc:   "the mapping's event source: `sqs` (the controller sizes `MaximumConcurrency` and turns the mapping off and on) or `kafka` (an MSK or self-managed Kafka mapping, which has no `MaximumConcurrency`: only turned off and on, for a pause); needs `esm_uuid`",
		codec: esmKind},
	{name: attrESMUpdateInterval, kind: kindDuration, def: "`5m`",
		doc:   "least time between two updates of the mapping (a failed update is retried after it); needs `esm_uuid`",
		codec: esmUpdateInterval},
	{name: attrESMMinConcurrency, kind: kindNumber, def: "2",
		doc:   "lowest `MaximumConcurrency` the controller sets, a whole number in 2..1000; needs `esm_uuid`",
		codec: esmConcurrency(func(m *MappingConfig) *int { return &m.Min }, MinMappingConcurrency)},
	{name: attrESMMaxConcurrency, kind: kindNumber, def: "1000",
		doc:   "highest `MaximumConcurrency` the controller sets, a whole number in 2..1000, >= `esm_min_concurrency`; needs `esm_uuid`",
		codec: esmConcurrency(func(m *MappingConfig) *int { return &m.Max }, MaxMappingConcurrency)},
	{name: attrESMFunction, kind: kindString, def: "none",
		doc:   "name of the mapping's Lambda function when it contains no Sluice code (a foreign consumer: the end of the mapping's `FunctionArn`): while no lease reports for the loop, the controller sizes `MaximumConcurrency` from the function's `AWS/Lambda` `Duration` and `Invocations` and the queue's `AWS/SQS` `NumberOfMessagesDeleted` (one CloudWatch batch per tick), tells the controller the deleted messages as the processed rate, and turns the mapping off while the allowed rate is below what two instances take (on again 20 % above it); needs `esm_uuid`, kind `sqs`, and `esm_queue` or `depth_queue`",
		codec: esmText(func(m *MappingConfig) *string { return &m.Function })},
	{name: attrESMQueue, kind: kindString, def: "`depth_queue`",
		doc:   "name of the foreign consumer's SQS queue (the end of the mapping's `EventSourceArn`), whose `NumberOfMessagesDeleted` is the processed rate; needs `esm_function`",
		codec: esmText(func(m *MappingConfig) *string { return &m.Queue })},
	{name: attrNodes, kind: kindNodes, def: "none",
		doc:   "the destination's nodes for the balancer: node name → `{\"endpoint\": S, \"metric\": S}`. `endpoint` is the URL the consumers' HTTP sink posts to (RATE's `weights` are keyed by it; unique per node); `metric` is the node's CloudWatch dimensions (`Name=value[,Name2=value2]`, merged over `metric_dimensions`, or a bare value for its single dimension, `DBInstanceIdentifier` when there is none) or, with `metric_source` `prometheus`, the node's PromQL. At most 100 nodes",
		codec: nodes},
	{name: attrRegulate, kind: kindString, def: "`max`",
		doc:   "with nodes: what the rate loop holds at `setpoint`, `max` (the hottest node with a fresh metric) or `mean`",
		codec: text(func(p *Params) *string { return (*string)(&p.Regulate) }, "", unlessZero)},
	{name: attrBalanceKp, kind: kindNumber, def: "0.3",
		doc:   "balancer proportional gain, per unit of relative error, >= 0",
		codec: balanceNumber(func(c *balance.Config) *float64 { return &c.ProportionalGain })},
	{name: attrBalanceKi, kind: kindNumber, def: "6 / `tick_period` s",
		doc:   "balancer integral gain per second, > 0 (0.4 of the relative error per tick: 0.1 at the 1 min default)",
		codec: balanceNumber(func(c *balance.Config) *float64 { return &c.IntegralGain })},
	{name: attrBalanceMinShare, kind: kindNumber, def: "0.01",
		doc:   "lowest node weight, a multiple of the equal share 1/N, in (0, 1]",
		codec: balanceNumber(func(c *balance.Config) *float64 { return &c.MinShare })},
	{name: attrBalanceMaxShare, kind: kindNumber, def: "8",
		doc:   "highest node weight, a multiple of the equal share 1/N, >= 1",
		codec: balanceNumber(func(c *balance.Config) *float64 { return &c.MaxShare })},
	{name: attrBalanceMinMean, kind: kindNumber, def: "1",
		doc:   "fleet mean utilization, percent, below which the weights are held",
		codec: balanceNumber(func(c *balance.Config) *float64 { return &c.MinMean })},
	{name: attrSignals, kind: kindSignals, def: "none",
		doc:   "further signals (override control): signal name (`[a-z0-9_-]{1,32}`, at most 8 signals in all) → a map of its own attributes, meaning what they mean at the top level: {per-signal}. Each signal has its own controller; the rate is the lowest output, the others track it; a stale signal follows its own policy, and the loop fails closed to `min_rate` if the signal limiting the rate goes stale",
		codec: codec{}}, // DecodeParams and Attrs call decodeSignals and encodeSignals
	{name: AttrExperiment, kind: kindString, def: "none",
		doc:   "a guarded experiment (`sluice tune --experiment`, the dashboard's button): `id=ID,step=POINTS,abort_above=LEVEL,max_duration=DURATION[,max_rate_step=RATE]`. Once per `id`, the setpoint is offset by `step` (at most 20 points) for `max_duration` (at most 24h), the rate stays within `max_rate_step` of the rate before it; the first fresh datapoint at or above `abort_above` aborts it at once, back to the setpoint and the rate before it (bumpless); a stale metric ends it. Bounds, slew limit and stale policy stay in force; its progress is in STATE (`experiment`)",
		codec: experimentCodec},
	{name: AttrDestination, kind: kindString, def: "none",
		doc:   "makes the loop a member of a destination: the loop id whose signals and controllers set the rate that its members share (several queues into one database). A member's PARAMS hold only `enabled`, `min_rate`, `max_rate`, `demand_headroom`, `depth_queue`, `depth_retention`, the `esm_*` attributes, `weight` and `priority`; each tick gives it its weighted max-min fair share of the destination's rate by demand, in its own RATE item",
		codec: destinationCodec},
	{name: AttrWeight, kind: kindNumber, def: "1",
		doc:   "a member's share of its destination's rate within its priority class, > 0; needs `destination`",
		codec: weightCodec},
	{name: AttrPriority, kind: kindNumber, def: "0",
		doc:   "a member's strict priority class, a whole number in -1000..1000: the destination's rate goes to the higher classes first, a lower class gets what they do not take; needs `destination`",
		codec: priorityCodec},
}

// omit says whether an attribute is left out of the item for its value.
type omit bool

const (
	always     omit = false // always written
	unlessZero omit = true  // left out at its zero value
)

// field is the codec of the Params field f points to: read reads it (def
// when absent) and write gives its value in the item, left out at its zero
// value when o says so. With cfg (at most one), the value is also the
// control.Config setting cfg points to.
func field[T comparable](f func(*Params) *T, read func(d *decoder, name string, def T) T, write func(T) any, def T, o omit, cfg []func(*control.Config) *T) codec {
	c := codec{
		decode: func(d *decoder, p *Params, name string) { *f(p) = read(d, name, def) },
		encode: func(p Params, a map[string]any, name string) {
			var zero T
			if v := *f(&p); v != zero || o == always {
				a[name] = write(v)
			}
		},
		value: func(p Params) any { return *f(&p) },
	}
	if len(cfg) > 0 {
		c.config = func(p Params, cc *control.Config) { *cfg[0](cc) = *f(&p) }
	}
	return c
}

// asIs writes a value as it is: numbers, strings and booleans.
func asIs[T any](v T) any { return v }

// durationText writes a duration as the text DynamoDB keeps ("1m30s").
func durationText(v time.Duration) any { return v.String() }

func number(f func(*Params) *float64, def float64, o omit, cfg ...func(*control.Config) *float64) codec {
	return field(f, (*decoder).number, asIs[float64], def, o, cfg)
}

func text(f func(*Params) *string, def string, o omit, cfg ...func(*control.Config) *string) codec {
	return field(f, (*decoder).str, asIs[string], def, o, cfg)
}

func duration(f func(*Params) *time.Duration, def time.Duration, o omit, cfg ...func(*control.Config) *time.Duration) codec {
	return field(f, (*decoder).duration, durationText, def, o, cfg)
}

func boolean(f func(*Params) *bool, def bool, o omit, cfg ...func(*control.Config) *bool) codec {
	return field(f, (*decoder).boolean, asIs[bool], def, o, cfg)
}

// The attributes whose default or presence depends on other attributes.

var manualRate = codec{
	decode: func(d *decoder, p *Params, name string) { p.ManualRate = d.number(name, 0) },
	encode: func(p Params, a map[string]any, name string) {
		if p.Mode == ModeManual || p.ManualRate != 0 {
			a[name] = p.ManualRate
		}
	},
}

// antiWindup: "none" in the item is control.AntiWindupNone ("").
var antiWindup = codec{
	decode: func(d *decoder, p *Params, name string) {
		aw := d.str(name, string(control.AntiWindupConditional))
		if aw == "none" {
			aw = string(control.AntiWindupNone)
		}
		p.AntiWindup = control.AntiWindup(aw)
	},
	encode: func(p Params, a map[string]any, name string) {
		aw := string(p.AntiWindup)
		if aw == "" {
			aw = "none"
		}
		a[name] = aw
	},
	config: func(p Params, c *control.Config) { c.AntiWindup = p.AntiWindup },
}

// feedforwardAttrs are the attributes of the feedforward model: any of them
// enables it, and then ff_gain is required.
var feedforwardAttrs = []string{attrFFGain, attrFFBase, attrFFTau, attrFFDeadTime}

// model returns p's feedforward model, created when the item has any of its
// attributes; nil otherwise.
func (d *decoder) model(p *Params) *control.FOPDT {
	if p.Feedforward == nil && slices.ContainsFunc(feedforwardAttrs, d.present) {
		p.Feedforward = &control.FOPDT{}
	}
	return p.Feedforward
}

var ffGain = codec{
	decode: func(d *decoder, p *Params, name string) {
		m := d.model(p)
		if m == nil {
			return
		}
		if !d.present(name) {
			d.fail(name, "missing; feedforward attributes (ff_base, ff_tau, ff_dead_time) need the model gain")
		}
		m.Gain = d.number(name, 0)
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Feedforward != nil {
			a[name] = p.Feedforward.Gain
		}
	},
}

// ffField is the codec of the feedforward model's field f points to (0
// when absent), read and written as field's are.
func ffField[T any](f func(*control.FOPDT) *T, read func(d *decoder, name string, def T) T, write func(T) any) codec {
	return codec{
		decode: func(d *decoder, p *Params, name string) {
			if m := d.model(p); m != nil {
				var zero T
				*f(m) = read(d, name, zero)
			}
		},
		encode: func(p Params, a map[string]any, name string) {
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
	decode: func(d *decoder, p *Params, name string) {
		p.RateTTL = d.duration(name, 0)
		if !d.present(name) && !d.failed(attrTickPeriod) {
			p.RateTTL = DefaultRateTTLTicks * p.TickPeriod
		}
	},
	encode: func(p Params, a map[string]any, name string) { a[name] = p.RateTTL.String() },
}

// safeRate defaults to min_rate.
var safeRate = codec{
	decode: func(d *decoder, p *Params, name string) {
		p.Stale.SafeRate = d.number(name, math.NaN())
		if math.IsNaN(p.Stale.SafeRate) {
			p.Stale.SafeRate = p.MinRate
		}
	},
	encode: func(p Params, a map[string]any, name string) { a[name] = p.Stale.SafeRate },
}

var nodes = codec{
	decode: func(d *decoder, p *Params, _ string) { p.Nodes = d.decodeNodes() },
	encode: func(p Params, a map[string]any, name string) {
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
var balanceAttrs = []string{attrBalanceKp, attrBalanceKi, attrBalanceMinShare, attrBalanceMaxShare, attrBalanceMinMean}

func balanceNumber(f func(*balance.Config) *float64) codec {
	return codec{
		decode: func(d *decoder, p *Params, name string) {
			if !slices.ContainsFunc(balanceAttrs, d.present) {
				return
			}
			def := DefaultBalanceConfig(p.TickPeriod)
			if p.Balance == nil {
				p.Balance = &def
			}
			*f(p.Balance) = d.number(name, *f(&def))
		},
		encode: func(p Params, a map[string]any, name string) {
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
	b.WriteString("| attribute | type | unit | default | range | per signal | meaning |\n|---|---|---|---|---|---|---|\n")
	for _, p := range paramsFor(sources) {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", p.name, p.kind.short(), p.unit, p.def, p.rangeText(),
			map[bool]string{true: "yes"}[p.signal], p.markdown())
	}
	return b.String()
}

// bounds is the range of a number or a duration attribute (durations in
// seconds); an open end excludes its bound.
type bounds struct {
	lo, hi         float64
	loOpen, hiOpen bool
}

// atLeast is [lo, ∞), above (lo, ∞), within [lo, hi].
func atLeast(lo float64) *bounds    { return &bounds{lo: lo, hi: math.Inf(1)} }
func above(lo float64) *bounds      { return &bounds{lo: lo, hi: math.Inf(1), loOpen: true} }
func within(lo, hi float64) *bounds { return &bounds{lo: lo, hi: hi} }

// contains reports whether v is a finite number within b.
func (b bounds) contains(v float64) bool {
	return finite(v) && (v > b.lo || (!b.loOpen && v == b.lo)) && (v < b.hi || (!b.hiOpen && v == b.hi))
}

// text is the range as an operator reads it: ">= 0", "> 0", "in [0, 100]";
// show writes a bound in the attribute's own terms.
func (b bounds) text(show func(float64) string) string {
	if math.IsInf(b.hi, 1) {
		return map[bool]string{false: ">= ", true: "> "}[b.loOpen] + show(b.lo)
	}
	return "in " + map[bool]string{false: "[", true: "("}[b.loOpen] + show(b.lo) + ", " + show(b.hi) + map[bool]string{false: "]", true: ")"}[b.hiOpen]
}

// rangeText is p's range as the docs and refusals show it ("" when any
// value goes).
func (p param) rangeText() string {
	if p.bounds == nil {
		return ""
	}
	if p.kind == kindDuration {
		return p.bounds.text(func(s float64) string { return time.Duration(s * float64(time.Second)).String() })
	}
	return p.bounds.text(func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) })
}

// checkBounds refuses every attribute of p whose value is outside its
// declared range.
func (p Params) checkBounds(fail failFunc) {
	for _, f := range paramTable {
		if f.bounds == nil || f.value == nil {
			continue
		}
		switch v := f.value(p).(type) {
		case float64:
			if !f.bounds.contains(v) {
				fail(f.name, "%v must be a finite number %s", v, f.rangeText())
			}
		case time.Duration:
			if !f.bounds.contains(v.Seconds()) {
				fail(f.name, "%v must be a duration %s", v, f.rangeText())
			}
		}
	}
}
