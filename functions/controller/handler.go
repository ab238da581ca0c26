package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/functions/controller/invocation"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/drift"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// ticker runs one controller tick over every loop.
type ticker interface {
	Tick(ctx context.Context) ([]loop.Report, error)
}

// history keeps one point per loop per tick for the dashboard
// (ddbhistory.Store).
type history interface {
	AppendReports(ctx context.Context, t time.Time, reports []loop.Report) error
}

// handler is the Lambda handler: one tick per scheduled event.
type handler struct {
	ticker    ticker
	log       *slog.Logger
	namespace string
	now       func() time.Time
	// history, when not nil, receives every tick's reports; a failure to
	// write it is logged, not returned: the loops did tick.
	history history
}

// handle ticks every loop and logs one JSON line per loop, which is also a
// CloudWatch Embedded Metric Format record. One loop's failure (a corrupt
// item, a failed commit) is that loop's: it is logged with LoopError = 1
// and named in invocation.Result.Problems, and the other loops tick. The invocation
// fails (so that the Lambda Errors metric and its alarm see it) only when
// the store could not be read or loops failed and none ticked; a retried
// invocation finds the loops that did tick not due.
func (h *handler) handle(ctx context.Context, ev events.EventBridgeEvent) (invocation.Result, error) {
	reports, err := h.ticker.Tick(ctx)
	if err != nil {
		h.log.ErrorContext(ctx, "tick failed", "event_id", ev.ID, "error", err)
		return invocation.Result{}, err
	}
	res := invocation.Result{Loops: len(reports), Outcomes: map[string]int{}, Applied: map[string]int64{}, Lost: []string{}, Problems: map[string]string{}}
	var failed []error
	now := h.now()
	for _, r := range reports {
		res.Outcomes[string(r.Outcome)]++
		switch r.Outcome {
		case loop.OutcomeApplied:
			res.Applied[r.Loop] = r.Tick
		case loop.OutcomeLost:
			res.Lost = append(res.Lost, r.Loop)
		case loop.OutcomeError:
			failed = append(failed, fmt.Errorf("loop %s: %w", r.Loop, r.Err))
		}
		if r.RateWritten {
			res.RateWrites++
		}
		if r.ParamsStatus == loop.StatusRefused {
			res.Refused++
		}
		if p := problem(r); p != "" {
			res.Problems[r.Loop] = p
		}
		h.logReport(ctx, ev, r, now)
	}
	if h.history != nil {
		if err := h.history.AppendReports(ctx, now, reports); err != nil {
			h.log.WarnContext(ctx, "history not written", "event_id", ev.ID, "error", err)
		}
	}
	if len(failed) > 0 && healthy(res.Outcomes) == 0 {
		return res, fmt.Errorf("controller tick: %d of %d loops failed and none ticked: %w", len(failed), len(reports), errors.Join(failed...))
	}
	return res, nil
}

// healthy counts the loops whose tick went through: applied, applied by
// another invocation (lost), or not due yet.
func healthy(outcomes map[string]int) int {
	return outcomes[string(loop.OutcomeApplied)] + outcomes[string(loop.OutcomeLost)] + outcomes[string(loop.OutcomeNotDue)]
}

// problem is the reason to report for a loop, or "" when it has none.
func problem(r loop.Report) string {
	switch {
	case r.Outcome == loop.OutcomeError && r.Err != nil:
		return "error: " + r.Err.Error()
	case r.ParamsStatus == loop.StatusRefused:
		return "params refused: " + r.ParamsReason
	case r.Outcome == loop.OutcomeNoParams:
		return "params refused earlier: the loop has no valid PARAMS (its PARAMS_STATUS item gives the reason)"
	case r.Mapping != nil && r.Mapping.Err != "":
		return "event source mapping not updated (the consumers keep pacing in the Lambda): " + r.Mapping.Err
	case r.Err != nil:
		return "metric: " + r.Err.Error()
	}
	return ""
}

// mappingAttrs are the log attributes of a loop's event source mapping
// (none for a loop that owns none), and whether they call for a warning.
func mappingAttrs(r loop.Report) ([]slog.Attr, bool) {
	m := r.Mapping
	if m == nil {
		return nil, false
	}
	attrs := []slog.Attr{slog.String("mapping_uuid", m.UUID), slog.Int("mapping_concurrency", m.Concurrency),
		slog.Int("mapping_target", m.Target), slog.Bool("mapping_updated", m.Updated),
		slog.Float64("batch_seconds", m.BatchSeconds), slog.Float64("batch_size", m.BatchSize)}
	if m.Err == "" {
		return attrs, false
	}
	return append(attrs, slog.String("mapping_error", m.Err),
		slog.String("mapping_fallback", "the consumers keep pacing in the Lambda at the mapping's concurrency; retried after esm_update_interval")), true
}

// signalsMeasured maps each signal with a fresh measurement to it.
func signalsMeasured(r loop.Report) map[string]float64 {
	m := make(map[string]float64, len(r.Signals))
	for _, s := range r.Signals {
		if !s.Stale && !math.IsNaN(s.Measured) {
			m[s.Name] = s.Measured
		}
	}
	return m
}

func (h *handler) logReport(ctx context.Context, ev events.EventBridgeEvent, r loop.Report, now time.Time) {
	attrs := []slog.Attr{
		slog.String("event_id", ev.ID),
		slog.String("outcome", string(r.Outcome)),
		slog.Int64("tick", r.Tick),
		slog.Bool("rate_written", r.RateWritten),
	}
	if r.Mode != "" {
		attrs = append(attrs, slog.String("mode", string(r.Mode)))
	}
	if !r.MetricAt.IsZero() {
		attrs = append(attrs, slog.Time("metric_at", r.MetricAt))
	}
	if r.Resumed {
		attrs = append(attrs, slog.Bool("resumed", true))
	}
	if r.Reason != nil {
		// What set the rate: a code (also the EMF dimension Reason) and
		// a sentence.
		attrs = append(attrs, slog.String("reason", string(r.Reason.Code)), slog.String("reason_text", r.Reason.Text))
	}
	attrs = append(attrs, loopAttrs(r)...)
	level := slog.LevelInfo
	for _, part := range []func(loop.Report) ([]slog.Attr, bool){driftAttrs, mappingAttrs, verdictAttrs, memberAttrs} {
		if a, warn := part(r); a != nil {
			attrs = append(attrs, a...)
			if warn {
				level = slog.LevelWarn
			}
		}
	}
	if r.Err != nil {
		level = max(level, slog.LevelWarn)
		if r.Outcome == loop.OutcomeError {
			level = slog.LevelError
		}
		attrs = append(attrs, slog.String("error", r.Err.Error()))
	}
	h.log.LogAttrs(ctx, level, "loop tick", append(attrs, h.emfAttrs(r, now)...)...)
}

// loopAttrs are the balancer's and the signals' figures of r's loop.
func loopAttrs(r loop.Report) []slog.Attr {
	var attrs []slog.Attr
	if r.Weights != nil {
		// A balanced loop: the weights written to RATE (by endpoint), the
		// fresh node utilizations, and the nodes that kept their weight.
		attrs = append(attrs, slog.Any("weights", r.Weights), slog.Any("nodes", r.Nodes))
		if len(r.NodesMissing) > 0 {
			attrs = append(attrs, slog.Any("nodes_missing", r.NodesMissing))
		}
	}
	if r.Limiting != "" {
		// Several signals (override control): which one set the rate,
		// and each one's fresh measurement.
		attrs = append(attrs, slog.String("limiting", r.Limiting), slog.Any("signals", signalsMeasured(r)))
	}
	return attrs
}

// driftAttrs are the verdict that the plant moved away from the loop's
// model (drift.State): a warning until the model is edited.
func driftAttrs(r loop.Report) ([]slog.Attr, bool) {
	if !r.ModelDrift {
		return nil, false
	}
	attrs := []slog.Attr{slog.Bool("model_drift", true), slog.Float64("drift_gain_ratio", r.DriftGainRatio)}
	if r.DriftReason == drift.ReasonDeadTime {
		attrs = append(attrs, slog.String("drift_reason", r.DriftReason), slog.Float64("drift_dead_time_s", r.DriftDeadTime.Seconds()))
	}
	return attrs, true
}

// verdictAttrs are the verdict on an edit of PARAMS: a refusal warns.
func verdictAttrs(r loop.Report) ([]slog.Attr, bool) {
	var attrs []slog.Attr
	if r.ParamsStatus != "" {
		attrs = append(attrs, slog.String("params_status", r.ParamsStatus))
	}
	if r.ParamsReason != "" {
		attrs = append(attrs, slog.String("params_reason", r.ParamsReason))
	}
	if r.ParamsUpdatedBy != "" {
		// Who made the edit checked, and what it changed (the editor's record).
		attrs = append(attrs, slog.String("params_updated_by", r.ParamsUpdatedBy), slog.String("params_changes", r.ParamsChanges))
	}
	return attrs, r.ParamsReason != ""
}

// emfAttrs are the metrics of r: only for loops whose tick ran (applied);
// a lost or skipped tick has nothing new to publish.
func (h *handler) emfAttrs(r loop.Report, now time.Time) []slog.Attr {
	switch r.Outcome {
	case loop.OutcomeApplied:
		return cwmetric.EMFAttrs(h.namespace, r, now)
	case loop.OutcomeError:
		return cwmetric.EMFLoopErrorAttrs(h.namespace, r.Loop, now)
	default:
		return []slog.Attr{slog.String(cwmetric.EMFDimension, r.Loop)}
	}
}
