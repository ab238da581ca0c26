package cwmetric

import (
	"log/slog"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// EMFDimension is the dimension of the controller's metrics.
const EMFDimension = "Loop"

// EMFReasonDimension is the second dimension of ReasonTicks, the count of
// a loop's ticks by the reason that set the rate (loop.ReasonCode): one
// series per loop and reason, so that an alarm or a graph sees a loop that
// sits at min_rate or stale.
const EMFReasonDimension = "Reason"

// emfMetric is one metric of a tick's EMF record.
type emfMetric struct {
	name, unit string
	v          float64
}

// emfMetrics are the metrics of r's EMF record, NaN where r has no value.
func emfMetrics(r loop.Report) []emfMetric {
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	all := []emfMetric{
		{"MeasuredCPU", "Percent", r.Measured},
		{"Setpoint", "Percent", r.Setpoint},
		{"AllowedRate", "Count/Second", r.Rate},
		{"PTerm", "None", r.P},
		{"ITerm", "None", r.I},
		{"DTerm", "None", r.D},
		{"FFTerm", "None", r.FF},
		{"Saturated", "None", flag(r.Saturated)},
		{"Stale", "None", flag(r.Stale)},
		{"AtMinRate", "None", flag(r.AtMin)},
		{"MetricAge", "Seconds", r.MetricAge.Seconds()},
		{"ProcessedRate", "Count/Second", processed(r)},
		{"LiveConsumers", "Count", float64(r.LivePeers)},
		{"DemandLimited", "None", flag(r.DemandLimited)},
	}
	if m := r.Mapping; m != nil {
		// A loop that owns an event source mapping (PARAMS esm_uuid).
		all = append(all, emfMetric{"MappingConcurrency", "Count", float64(m.Concurrency)},
			emfMetric{"MappingTarget", "Count", float64(m.Target)},
			emfMetric{"MappingUpdateFailed", "None", flag(m.Err != "")})
	}
	if m := r.Member; m != nil {
		// A member of a destination (PARAMS destination): its share of the
		// destination's rate, which the destination's own line carries.
		all = append(all, emfMetric{"MemberShare", "None", m.Share}, emfMetric{"MemberWeight", "None", m.Weight})
	}
	return all
}

// EMFAttrs returns slog attributes that make a JSON log line of a loop's
// tick also a CloudWatch Embedded Metric Format record: the `_aws` metadata
// and one top-level member per metric (measured CPU, setpoint, allowed rate,
// P, I, D and feedforward terms, saturation, stale and at-minimum flags, the
// processed rate the consumers reported, their live instances and the
// demand-limited flag), in namespace, by the dimension Loop, and
// ReasonTicks = 1 by Loop and Reason (EMFReasonDimension) when the tick
// has a reason. A missing measurement or processed rate is left out rather
// than published as 0.
func EMFAttrs(namespace string, r loop.Report, at time.Time) []slog.Attr {
	all := emfMetrics(r)
	defs := make([]any, 0, len(all))
	attrs := make([]slog.Attr, 0, len(all)+2)
	for _, m := range all {
		if math.IsNaN(m.v) || math.IsInf(m.v, 0) || (m.name == "MetricAge" && r.MetricAt.IsZero()) {
			continue
		}
		defs = append(defs, map[string]any{"Name": m.name, "Unit": m.unit})
		attrs = append(attrs, slog.Float64(m.name, m.v))
	}
	directives := []any{map[string]any{
		"Namespace":  namespace,
		"Dimensions": []any{[]any{EMFDimension}},
		"Metrics":    defs,
	}}
	if r.Reason != nil && r.Reason.Code != "" {
		directives = append(directives, map[string]any{
			"Namespace":  namespace,
			"Dimensions": []any{[]any{EMFDimension, EMFReasonDimension}},
			"Metrics":    []any{map[string]any{"Name": "ReasonTicks", "Unit": "Count"}},
		})
		attrs = append(attrs, slog.Float64("ReasonTicks", 1), slog.String(EMFReasonDimension, string(r.Reason.Code)))
	}
	meta := map[string]any{"Timestamp": at.UnixMilli(), "CloudWatchMetrics": directives}
	return append(attrs, slog.Any("_aws", meta), slog.String(EMFDimension, r.Loop))
}

// EMFLoopErrorAttrs returns the attributes of an Embedded Metric Format
// record with one metric, LoopError = 1, for a loop whose tick failed (a
// corrupt item, a failed commit): an alarm on the maximum of LoopError over
// every loop sees a broken loop while the others keep ticking.
func EMFLoopErrorAttrs(namespace, loopID string, at time.Time) []slog.Attr {
	meta := map[string]any{
		"Timestamp": at.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  namespace,
			"Dimensions": []any{[]any{EMFDimension}},
			"Metrics":    []any{map[string]any{"Name": "LoopError", "Unit": "Count"}},
		}},
	}
	return []slog.Attr{slog.Float64("LoopError", 1), slog.Any("_aws", meta), slog.String(EMFDimension, loopID)}
}

// processed is the processed rate of r, NaN when the consumers did not
// report one.
func processed(r loop.Report) float64 {
	if !r.ProcessedKnown {
		return math.NaN()
	}
	return r.Processed
}
