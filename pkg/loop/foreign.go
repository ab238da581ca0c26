package loop

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// A foreign consumer: an SQS Lambda that contains no Sluice code, whose
// event source mapping a loop owns (esm_uuid with esm_function). It reports
// no lease and has no pacer, so the mapping is the only actuator: the tick
// sizes MaximumConcurrency from the function's and the queue's own
// CloudWatch figures (the Lambda Duration and Invocations, the queue's
// NumberOfMessagesDeleted), read in one batch per tick, and turns the
// mapping off while the allowed rate is below what the least concurrency
// (two instances) takes. The deleted messages are the processed rate the
// controller is told. A lease that reports for the loop makes it a Sluice
// consumer again: the leases size the mapping (mapping.go). See
// docs/controller.md, "Foreign consumers".

// CloudWatch metrics of a foreign consumer: what AWS Lambda publishes for
// every function (AWS/Lambda, FunctionName) and SQS for every queue
// (AWS/SQS, QueueName), each per minute.
const (
	LambdaNamespace   = "AWS/Lambda"
	FunctionDimension = "FunctionName"
	// DurationMetric is an invocation's run time, milliseconds (read as
	// the Average: the mean time of a batch).
	DurationMetric = "Duration"
	// InvocationsMetric is the number of invocations (Sum): one a batch.
	InvocationsMetric = "Invocations"
	// DeletedMetric is the number of messages deleted from the queue
	// (Sum): what the mapping deletes after a batch succeeds.
	DeletedMetric = "NumberOfMessagesDeleted"
)

// Settings of a foreign consumer's mapping.
const (
	// DefaultMappingBatchSize is the batch size assumed until the figures
	// give one: an SQS mapping's default BatchSize.
	DefaultMappingBatchSize = 10
	// FloorHysteresis is how far above the floor (what MinMappingConcurrency
	// instances take) the allowed rate must be for the tick to turn a
	// mapping it turned off for the floor on again.
	FloorHysteresis = 0.2
)

const (
	attrESMFunction = "esm_function"
	attrESMQueue    = "esm_queue"
)

// FunctionFigures are a foreign consumer's figures at a tick.
type FunctionFigures struct {
	// BatchSeconds is the mean Duration of an invocation, seconds (0:
	// unknown); Invocations and Deleted the invocations and the deleted
	// messages per second over the newest minute, when DeletedKnown;
	// DeletedSince is when that minute began.
	BatchSeconds float64
	Invocations  float64
	Deleted      float64
	DeletedKnown bool
	DeletedSince time.Time
}

// MappingQueue is the queue of a foreign consumer's mapping: esm_queue, or
// depth_queue without it ("" for a loop without a mapping).
func (p Params) MappingQueue() string {
	if p.Mapping == nil {
		return ""
	}
	if p.Mapping.Queue != "" {
		return p.Mapping.Queue
	}
	return p.DepthQueue
}

// FunctionQueries are the CloudWatch queries of a foreign consumer's
// figures, looking back lookback: the function's Duration (Average) and
// Invocations (Sum), the queue's NumberOfMessagesDeleted (Sum), per minute.
func FunctionQueries(function, queue string, lookback time.Duration) []metric.Query {
	q := func(ns, name, dim, value, stat string) metric.Query {
		return metric.Query{Source: DepthSource, Namespace: ns, Metric: name, Dimensions: map[string]string{dim: value},
			Statistic: stat, Period: time.Minute, Lookback: lookback}
	}
	return []metric.Query{
		q(LambdaNamespace, DurationMetric, FunctionDimension, function, "Average"),
		q(LambdaNamespace, InvocationsMetric, FunctionDimension, function, "Sum"),
		q(DepthNamespace, DeletedMetric, DepthDimension, queue, "Sum"),
	}
}

// foreign reports whether the loop's mapping is a foreign consumer's at
// this tick: it names its function and no lease reports for the loop.
func (w *due) foreign() bool {
	m := w.params.Mapping
	if m == nil || m.Function == "" || !m.scaled() {
		return false
	}
	var prevTick time.Time
	if w.snap.State != nil {
		prevTick = w.snap.State.TickAt
	}
	return len(unsettled(w.snap.Peers, prevTick)) == 0
}

// readFunctions reads the figures of every due loop with a foreign
// consumer: one ReadMetrics call on the CloudWatch reader for all of them,
// three queries a loop. A figure that cannot be read is unknown.
func (t *Ticker) readFunctions(ctx context.Context, work []*due, now time.Time) {
	reader := t.Metrics[DepthSource]
	var qs []metric.Query
	var ws []*due
	for _, w := range work {
		if w.foreign() {
			lookback := max(w.params.StaleAfter, 5*time.Minute)
			qs = append(qs, FunctionQueries(w.params.Mapping.Function, w.params.MappingQueue(), lookback)...)
			ws = append(ws, w)
		}
	}
	if len(qs) == 0 || reader == nil {
		return
	}
	samples, err := reader.ReadMetrics(ctx, qs, now)
	if err != nil || len(samples) < len(qs) {
		return
	}
	for i, w := range ws {
		w.fn = functionFigures(samples[3*i:3*i+3], now)
	}
}

// functionFigures turns the samples of FunctionQueries into figures. A
// minute still running when read (CloudWatch's newest datapoint) counts
// over the part of it that has passed; a deleted count whose minute ended
// more than a minute ago is not the current rate (unknown).
func functionFigures(s []metric.Sample, now time.Time) FunctionFigures {
	var f FunctionFigures
	ok := func(x metric.Sample) bool { return x.Err == nil && x.Found && x.Value >= 0 && !math.IsInf(x.Value, 0) }
	if ok(s[0]) && s[0].Value > 0 {
		f.BatchSeconds = s[0].Value / 1000
	}
	perSecond := func(x metric.Sample) float64 {
		span := min(max(now.Sub(x.Time), time.Second), time.Minute)
		return x.Value / span.Seconds()
	}
	if ok(s[1]) && now.Sub(s[1].Time) <= 2*time.Minute {
		f.Invocations = perSecond(s[1])
	}
	if ok(s[2]) && now.Sub(s[2].Time) <= 2*time.Minute {
		f.Deleted, f.DeletedKnown, f.DeletedSince = perSecond(s[2]), true, s[2].Time
	}
	return f
}

// foreignDemand tells the controller the deleted messages as the processed
// rate of a foreign consumer; nothing while its mapping is off for the
// floor (the queue then deletes nothing, which is not what the
// destination can take), while the count's minute began before the tick
// last turned the mapping off or on (part of it is the time off), or when
// the count is unknown.
func (w *due) foreignDemand(prev *State, d *Demand, in *control.Input, r *Report) {
	if !w.foreign() {
		return
	}
	in.ActualRate, in.ActualKnown, in.ActualAllowed = 0, false, 0
	r.Processed, r.ProcessedKnown = 0, false
	d.Processed, d.Known = 0, false
	if !w.fn.DeletedKnown || prev != nil && (prev.Mapping.Floor || w.fn.DeletedSince.Before(prev.Mapping.SwitchedAt)) {
		return
	}
	in.ActualRate, in.ActualKnown = w.fn.Deleted, true
	r.Processed, r.ProcessedKnown = w.fn.Deleted, true
	d.Processed, d.Known = w.fn.Deleted, true
}

// measureFunction sets m's batch means from a foreign consumer's figures:
// the mean Duration, and the deleted messages per invocation (the previous
// size, or DefaultMappingBatchSize, without invocations). Without a
// Duration the previous means stay.
func measureFunction(f FunctionFigures, m *MappingState) {
	if f.BatchSeconds > 0 {
		m.BatchSeconds = f.BatchSeconds
	}
	if f.Invocations > 0 && f.DeletedKnown && f.Deleted > 0 {
		m.BatchSize = max(f.Deleted/f.Invocations, 1)
	}
	if m.BatchSize <= 0 {
		m.BatchSize = DefaultMappingBatchSize
	}
}

// FloorRate is what MinMappingConcurrency instances take at full speed
// when a batch of batchSize messages takes batchSeconds: a consumer without
// a pacer cannot go slower with its mapping on. 0 when unknown.
func FloorRate(batchSeconds, batchSize float64) float64 {
	if !(batchSeconds > 0) || !(batchSize > 0) {
		return 0
	}
	return MinMappingConcurrency * batchSize / batchSeconds
}

// floorOff decides whether a foreign consumer's mapping is off for the
// floor at rate: off below the floor, on again at FloorHysteresis above it.
// It was off when wasOff.
func floorOff(rate, floor float64, wasOff bool) bool {
	if !(floor > 0) {
		return wasOff
	}
	if wasOff {
		return rate < floor*(1+FloorHysteresis)
	}
	return rate < floor
}

// sizeForeign is scaleMapping's part for a foreign consumer: the batch
// means from the function's figures, the target without headroom (no
// pacer takes the rest), the floor, and whether the mapping is off for it
// (never in shadow mode).
func (w *due) sizeForeign(rate float64, m *MappingState, rep *MappingReport) bool {
	p := w.params.Mapping
	measureFunction(w.fn, m)
	m.Target = min(max(MappingConcurrency(rate, m.BatchSeconds, m.BatchSize, 0), p.Min), p.Max)
	if !(m.BatchSeconds > 0) {
		m.Target = 0
	}
	floor := FloorRate(m.BatchSeconds, m.BatchSize)
	m.Floor = w.params.Mode != ModeShadow && floorOff(rate, floor, m.Floor)
	rep.Foreign, rep.FloorRate, rep.Target = true, floor, m.Target
	rep.BatchSeconds, rep.BatchSize = m.BatchSeconds, m.BatchSize
	return m.Floor
}

// checkForeign checks a foreign consumer's function and queue.
func (p Params) checkForeign(fail failFunc) {
	m := p.Mapping
	if m == nil || (m.Function == "" && m.Queue == "") {
		return
	}
	switch {
	case strings.TrimSpace(m.Function) == "" && m.Function != "":
		fail(attrESMFunction, "empty; want the consumer function's name (the mapping's FunctionArn ends with it)")
	case m.Function == "":
		fail(attrESMQueue, "needs %s, the function whose figures size the mapping", attrESMFunction)
	case m.Kind == MappingKafka:
		fail(attrESMFunction, "a foreign consumer's mapping must be of kind sqs: a Kafka mapping has no MaximumConcurrency to size")
	case p.MappingQueue() == "":
		fail(attrESMFunction, "needs esm_queue (or depth_queue), the queue whose NumberOfMessagesDeleted is the processed rate")
	}
	for _, f := range []struct{ name, v string }{{attrESMFunction, m.Function}, {attrESMQueue, m.Queue}} {
		if strings.ContainsAny(f.v, ":/") {
			fail(f.name, "%q: want the name, not an ARN or URL (CloudWatch's dimension is the name)", truncate(f.v))
		}
	}
}
