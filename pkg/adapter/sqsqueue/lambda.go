package sqsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// Handler is the SQS consumer Lambda: one invocation is one consumer batch.
// The event source mapping must report batch item failures
// (FunctionResponseTypes: ReportBatchItemFailures): what was not stored is
// returned as a failure and SQS redelivers it; what was stored is deleted by
// the mapping.
//
// Poison messages (malformed payload, or refused for good by the sink) are
// sent by the handler to the dead-letter queue DeadLetterURL with their
// reason in ReasonAttribute, and then count as done. This keeps the reason
// with the message and does not spend maxReceiveCount redeliveries on a
// message that can never succeed. If the send fails, or DeadLetterURL is
// empty, the poison message is returned as a batch item failure and the
// queue's redrive policy moves it after maxReceiveCount; the reason is logged
// on every attempt. Nothing is dropped in silence.
type Handler struct {
	Consumer *consume.Consumer
	// API sends dead letters; nil with an empty DeadLetterURL.
	API           API
	DeadLetterURL string
	// PacingMargin is kept free before the invocation's deadline: pacing
	// that would run into it is cut short and the batch returned as
	// failures (default 3 s).
	PacingMargin time.Duration
	Log          *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// invocation when non-nil (os.Stdout in Lambda).
	Metrics   io.Writer
	Namespace string
	Loop      string
}

// FromEvent converts an SQS event record to a consumer message. Handle is
// the receipt handle.
func FromEvent(r events.SQSMessage) consume.Message {
	m := consume.Message{ID: r.MessageId, Body: []byte(r.Body), Handle: r.ReceiptHandle}
	if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err == nil {
		m.ReceiveCount = n
	}
	if ms, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms)
	}
	if len(r.MessageAttributes) > 0 {
		m.Attributes = map[string]string{}
		for k, v := range r.MessageAttributes {
			if v.StringValue != nil {
				m.Attributes[k] = *v.StringValue
			}
		}
	}
	return m
}

// Handle processes one SQS event.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	msgs := make([]consume.Message, len(ev.Records))
	for i, r := range ev.Records {
		msgs[i] = FromEvent(r)
	}
	pctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		margin := h.PacingMargin
		if margin <= 0 {
			margin = 3 * time.Second
		}
		var cancel context.CancelFunc
		pctx, cancel = context.WithDeadline(ctx, dl.Add(-margin))
		defer cancel()
	}
	rep := h.Consumer.Process(pctx, msgs)

	failures := []events.SQSBatchItemFailure{}
	for _, m := range rep.Retry {
		failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: m.ID})
	}
	deadLettered := 0
	if len(rep.Poison) > 0 {
		for _, p := range rep.Poison {
			log.WarnContext(ctx, "poison message", "id", p.Message.ID, "reason", p.Reason, "receive_count", p.Message.ReceiveCount)
		}
		sent := map[string]bool{}
		if h.DeadLetterURL != "" && h.API != nil {
			ok, err := SendDeadLetters(ctx, h.API, h.DeadLetterURL, rep.Poison)
			if err != nil {
				log.ErrorContext(ctx, "send dead letters; returning them as failures for redrive", "err", err)
			}
			for _, m := range ok {
				sent[m.ID] = true
			}
			deadLettered = len(ok)
		}
		for _, p := range rep.Poison {
			if !sent[p.Message.ID] {
				failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: p.Message.ID})
			}
		}
	}
	total, share, fallback := h.Consumer.Stats().AllowedRate()
	log.InfoContext(ctx, "batch", "loop", h.Loop, "messages", len(msgs), "stored", len(rep.Stored),
		"failed", len(rep.Retry), "poison", len(rep.Poison), "dead_lettered", deadLettered,
		"allowed_rate", total, "share", share, "rate_fallback", fallback)
	if h.Metrics != nil {
		h.emit(len(msgs), len(rep.Stored), len(rep.Retry), len(rep.Poison), total, share, fallback)
	}
	return events.SQSEventResponse{BatchItemFailures: failures}, nil
}

// emit writes one Embedded Metric Format line.
func (h *Handler) emit(consumed, stored, failed, poison int, allowed, share float64, fallback bool) {
	ns := h.Namespace
	if ns == "" {
		ns = "Sluice/Consumer"
	}
	if math.IsInf(allowed, 1) {
		allowed, share = -1, -1 // unlimited; JSON has no infinity
	}
	fb := 0
	if fallback {
		fb = 1
	}
	line := map[string]any{
		"_aws": map[string]any{
			"Timestamp": time.Now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  ns,
				"Dimensions": [][]string{{"Loop"}},
				"Metrics": []map[string]string{
					{"Name": "Consumed", "Unit": "Count"}, {"Name": "Stored", "Unit": "Count"},
					{"Name": "Failed", "Unit": "Count"}, {"Name": "Poison", "Unit": "Count"},
					{"Name": "AllowedRate", "Unit": "Count/Second"}, {"Name": "ShareRate", "Unit": "Count/Second"},
					{"Name": "RateFallback", "Unit": "Count"},
				},
			}},
		},
		"Loop": h.Loop, "Consumed": consumed, "Stored": stored, "Failed": failed, "Poison": poison,
		"AllowedRate": allowed, "ShareRate": share, "RateFallback": fb,
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	fmt.Fprintln(h.Metrics, string(b))
}
