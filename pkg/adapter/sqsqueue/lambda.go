package sqsqueue

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// Handler is the SQS consumer Lambda: one invocation is one consumer batch.
// The event source mapping must report batch item failures
// (FunctionResponseTypes: ReportBatchItemFailures): what was not stored is
// returned as a failure and SQS redelivers it (but for a message requeued
// as a copy: MaxRequeues); what was stored is deleted by the mapping.
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
	// API sends dead letters and sets the visibility of messages handed
	// back; nil with an empty DeadLetterURL and QueueURL.
	API           API
	DeadLetterURL string
	// QueueURL is the queue of the event source mapping. When set, the
	// messages returned as failures get a visibility that says when to try
	// them again: a backoff growing with their receive count when the
	// destination failed (RetryBackoff) or the rate is zero
	// (PausedBackoff), their pacing slot when only the deadline was short.
	// When empty they come back after the queue's visibility timeout.
	//
	// With QueueURL the handler also reads the queue's redrive policy
	// (maxReceiveCount, with the retention in one GetQueueAttributes call
	// per instance) and keeps a message's last receive, which a hand-back
	// would spend (SQS moves the message to the dead-letter queue at the
	// receive after it): a message on its last receive is stored whatever
	// the pacing (consume.Consumer.ProcessNow), and with the circuit open
	// so is one whose next receive is its last (a probe). Such a message
	// handed back because the destination fails is requeued (MaxRequeues):
	// sent again to QueueURL as a copy with a fresh receive count, and
	// reported as handled, so that the mapping deletes the original; when
	// it cannot be, it stays away as long as SQS allows (LastVisibility:
	// 12 h, within the retention), so that its last receive comes after
	// the fault.
	QueueURL string
	// RetryBackoff and PausedBackoff default to DefaultRetryBackoff and
	// DefaultPausedBackoff.
	RetryBackoff, PausedBackoff consume.Backoff
	// OpenBackoff (default DefaultOpenBackoff) is the long backoff of what
	// is handed back while the consumer's circuit is open after the batch
	// (the destination is down). The visibility grows with the outage's
	// age (OpenVisibility): about 30 s in its first seconds, so that a blip
	// recovers within a minute, and OpenBackoff's minutes once it has
	// lasted, so that an outage costs a message few receives before the
	// controller holds the mapping off. It is bounded by the time the
	// message has left in the queue (its MessageRetentionPeriod, read once
	// with GetQueueAttributes); when that cannot be read, RetryBackoff
	// applies.
	OpenBackoff consume.Backoff
	// QueueRetention is the queue's retention when GetQueueAttributes
	// does not report it (a stand-in; AWS always does): 0 then means
	// unknown, and RetryBackoff applies.
	QueueRetention time.Duration
	// MaxRequeues bounds how many times one message is requeued (0:
	// DefaultMaxRequeues, 16, about 11.5 h of a destination that never
	// recovers; negative: never). A message whose next receive is its
	// last, or on it, handed back because the destination fails (a failed
	// store, or deferred while the circuit is open or the breaker says the
	// destination is failing) is sent again to QueueURL with
	// SendMessageBatch: the same body and message attributes, plus
	// RequeueAttribute (the original message id and the requeue count),
	// delayed by the visibility it would have had (at most SQS's 15
	// minutes). Only once SQS took the copy is the original reported as
	// handled (not a batch item failure), and the mapping deletes it. The
	// copy's consume.Message has the original id (FromEvent), so that the
	// idempotent sinks see one message, and the copy's own receive count,
	// which the queue's redrive counts. A copy requeued MaxRequeues times,
	// a send SQS refuses, a copy over SQS's limits with the attribute (256
	// KiB, 10 attributes) and every message of a FIFO queue (a URL ending
	// in .fifo: a copy would lose its order in its group and its
	// deduplication) are kept as before (LastVisibility), so that a
	// destination that never recovers still ends in the dead-letter queue.
	// Poison the dead-letter queue refused, pacing deferrals and what is
	// handed back at a rate of zero are never requeued. The role needs
	// sqs:SendMessage on QueueURL.
	MaxRequeues int
	// PacingMargin is kept free before the invocation's deadline for
	// sending dead letters, setting visibilities and answering: the
	// consumer paces and stores only within the time before it (default
	// 2 s). The settling calls end a quarter of it before the deadline,
	// answered or not: the invocation never runs to its deadline.
	PacingMargin time.Duration
	Log          *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// invocation when non-nil (os.Stdout in Lambda).
	Metrics   io.Writer
	Namespace string
	Loop      string

	attrs   queueAttributes
	start   sync.Once
	started time.Time // this instance's first invocation
}

// FromEvent converts an SQS event record to a consumer message. Handle is
// the receipt handle. A copy the handler requeued (RequeueAttribute) gets
// the original message id, so that the sinks, idempotent by id, see one
// message, and its own receive count, which the queue's redrive counts;
// the attribute is left out of Attributes.
func FromEvent(r events.SQSMessage) consume.Message {
	m := consume.Message{ID: r.MessageId, Body: []byte(r.Body), Handle: r.ReceiptHandle}
	if id, _, ok := requeueOf(r); ok {
		m.ID = id
	}
	if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err == nil {
		m.ReceiveCount = n
	}
	if ms, err := strconv.ParseInt(r.Attributes["SentTimestamp"], 10, 64); err == nil {
		m.SentAt = time.UnixMilli(ms)
	}
	if ms, err := strconv.ParseInt(r.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64); err == nil {
		m.FirstReceivedAt = time.UnixMilli(ms)
	}
	if len(r.MessageAttributes) > 0 {
		m.Attributes = map[string]string{}
		for k, v := range r.MessageAttributes {
			if v.StringValue != nil && k != RequeueAttribute {
				m.Attributes[k] = *v.StringValue
			}
		}
	}
	return m
}

// Handle processes one SQS event: it stores what the rate and the time
// before the deadline allow, dead-letters the poison, and returns the rest
// as batch item failures at once, with a visibility saying when to retry.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	msgs := make([]consume.Message, len(ev.Records))
	recs := make(map[string]events.SQSMessage, len(ev.Records)) // by receipt handle
	for i, r := range ev.Records {
		msgs[i] = FromEvent(r)
		if r.ReceiptHandle != "" {
			recs[r.ReceiptHandle] = r
		}
	}
	// Processing ends PacingMargin before the deadline; the settling calls
	// (the dead letters, the visibility changes) a quarter of it before,
	// so that an SQS that does not answer never runs the invocation to its
	// deadline (which would fail the whole batch).
	pctx, sctx := ctx, ctx
	if dl, ok := ctx.Deadline(); ok {
		margin := defaults.Positive(h.PacingMargin, 2*time.Second)
		var cancelP, cancelS context.CancelFunc
		pctx, cancelP = context.WithDeadline(ctx, dl.Add(-margin))
		defer cancelP()
		sctx, cancelS = context.WithDeadline(ctx, dl.Add(-margin/4))
		defer cancelS()
	}
	h.start.Do(func() { h.started = h.Consumer.Clock().Now() })
	paced := h.Consumer.Stats().Paced()
	rep := h.process(pctx, log, msgs)
	paced = h.Consumer.Stats().Paced() - paced
	back := append(append([]consume.Message{}, rep.Retry...), rep.Deferred...)
	deadLettered, unsent := h.deadLetter(sctx, log, rep.Poison)
	back = append(back, unsent...)
	refused := 0 // poison the DLQ refused, counted for an alarm
	if h.DeadLetterURL != "" && h.API != nil {
		refused = len(unsent)
	}
	// Poison the DLQ refused comes back with the retry backoff, as a
	// message the destination failed: a DLQ that refuses for minutes does
	// not spend its receives before it recovers. It is never requeued.
	later := rep
	later.Retry = append(append([]consume.Message{}, rep.Retry...), unsent...)
	set := h.delay(sctx, log, later, unsent, recs)
	failures := []events.SQSBatchItemFailure{}
	for _, m := range back {
		if set.requeued[msgKey(m)] {
			continue // sent again to the queue: the mapping deletes the original
		}
		// The record's own message id, the only one the mapping knows (a
		// requeued copy's message has the original's).
		id := m.ID
		if r, ok := recs[receipt(m)]; ok {
			id = r.MessageId
		}
		failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	total, share, fallback := h.Consumer.Stats().AllowedRate()
	log.InfoContext(ctx, "batch", "loop", h.Loop, "messages", len(msgs), "stored", len(rep.Stored),
		"retry", len(rep.Retry), "deferred", len(rep.Deferred), "paused", rep.Paused, "poison", len(rep.Poison),
		"dead_lettered", deadLettered, "dead_letter_refused", refused, "requeued", len(set.requeued), "kept_last_receive", set.kept,
		"allowed_rate", total, "share", share, "rate_fallback", fallback)
	if h.Metrics != nil {
		m := consume.BatchMetrics{Loop: h.Loop, Consumed: len(msgs), Report: rep, DeadLettered: deadLettered, DeadLetterRefused: refused, Paced: paced,
			Requeued: len(set.requeued), KeptLastReceive: set.kept, Stats: h.Consumer.Stats()}
		if err := m.WriteEMF(h.Metrics, h.Namespace); err != nil {
			log.WarnContext(ctx, "metrics", "err", err)
		}
	}
	return events.SQSEventResponse{BatchItemFailures: failures}, nil
}

// msgKey identifies a message within one invocation: its receipt handle
// (a requeued copy and its original, both in one batch, share a message
// id), or its id when it has none.
func msgKey(m consume.Message) string {
	if r := receipt(m); r != "" {
		return r
	}
	return m.ID
}

// deadLetter sends the poison messages to the DLQ with their reasons and
// returns how many went, and those that did not (returned as failures: the
// redrive policy moves them after maxReceiveCount).
func (h *Handler) deadLetter(ctx context.Context, log *slog.Logger, poison []consume.Poison) (int, []consume.Message) {
	if len(poison) == 0 {
		return 0, nil
	}
	for _, p := range poison {
		log.WarnContext(ctx, "poison message", "id", p.Message.ID, "reason", p.Reason, "receive_count", p.Message.ReceiveCount)
	}
	sent := map[string]bool{}
	if h.DeadLetterURL != "" && h.API != nil {
		ok, err := SendDeadLetters(ctx, h.API, h.DeadLetterURL, poison)
		if err != nil {
			log.ErrorContext(ctx, "send dead letters; returning them as failures for redrive", "err", err)
		}
		for _, m := range ok {
			sent[m.ID] = true
		}
	}
	var unsent []consume.Message
	for _, p := range poison {
		if !sent[p.Message.ID] {
			unsent = append(unsent, p.Message)
		}
	}
	return len(sent), unsent
}

// settled is what delay did with the messages handed back, beyond their
// visibility: those it requeued (by msgKey) and how many it kept for
// their last receive (LastVisibility).
type settled struct {
	requeued map[string]bool
	kept     int
}

// delay sets the visibility of the messages handed back (when QueueURL is
// set): Retry by RetryBackoff and their receive count; Deferred at a rate
// of zero by PausedBackoff; other Deferred at their expected pacing slot,
// spread over DeferFor, at least RetryBackoff's. Those whose next receive
// is their last, or who are on it, handed back because the destination
// fails, are requeued (requeue; never one of poison, the unsent dead
// letters) or, when they cannot be, kept for as long as SQS allows
// (LastVisibility). recs are the invocation's records by receipt handle.
func (h *Handler) delay(ctx context.Context, log *slog.Logger, rep consume.Report, poison []consume.Message, recs map[string]events.SQSMessage) settled {
	if h.QueueURL == "" || h.API == nil || len(rep.Retry)+len(rep.Deferred) == 0 {
		return settled{}
	}
	retry, paused := h.RetryBackoff, h.PausedBackoff
	if retry.Base <= 0 {
		retry = DefaultRetryBackoff()
	}
	if paused.Base <= 0 {
		paused = DefaultPausedBackoff()
	}
	vis := map[string]time.Duration{}
	for _, m := range rep.Retry {
		vis[msgKey(m)] = RetryVisibility(retry, m)
	}
	for i, m := range rep.Deferred {
		if rep.Paused {
			vis[msgKey(m)] = RetryVisibility(paused, m)
			continue
		}
		slot := rep.DeferFor * time.Duration(i+1) / time.Duration(len(rep.Deferred))
		vis[msgKey(m)] = max(slot, RetryVisibility(retry, m))
	}
	back := append(append([]consume.Message{}, rep.Retry...), rep.Deferred...)
	br := h.Consumer.Breaker()
	failing := br.State() == consume.CircuitOpen || br.Failing()
	if !rep.Paused && failing {
		// The destination is failing: its circuit open, or a batch failed
		// whole, or a brownout that fails most messages.
		h.openVisibility(ctx, log, back, vis)
	}
	last := h.lastReceives(ctx, log, rep, failing)
	out := settled{requeued: h.requeue(ctx, log, without(last, poison), vis, recs)}
	spent := h.keepLastReceives(ctx, log, last, out.requeued, vis)
	out.kept = len(last) - len(out.requeued)
	if spent > 0 {
		log.WarnContext(ctx, "messages on their last receive handed back (the destination fails): kept invisible as long as SQS allows; the next receive moves them to the dead-letter queue unless maxReceiveCount is raised meanwhile",
			"messages", spent)
	}
	var change []consume.Message
	for _, m := range back {
		if !out.requeued[msgKey(m)] {
			change = append(change, m)
		}
	}
	err := ChangeVisibility(ctx, h.API, h.QueueURL, change, func(m consume.Message) time.Duration { return vis[msgKey(m)] })
	if err != nil {
		log.WarnContext(ctx, "set visibility of messages handed back; they return after the queue's timeout", "err", err)
	}
	return out
}
