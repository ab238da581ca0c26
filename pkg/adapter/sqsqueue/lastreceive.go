package sqsqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// attrsTimeout bounds the one GetQueueAttributes call of an instance, so
// that an SQS that does not answer does not take the invocation's time.
const attrsTimeout = 3 * time.Second

// queueLimits returns the queue's retention and its maxReceiveCount (0:
// no cap), read once; unknown (0, 0) without QueueURL and API.
func (h *Handler) queueLimits(ctx context.Context, log *slog.Logger) (time.Duration, int) {
	if h.QueueURL == "" || h.API == nil {
		return 0, 0
	}
	ctx, cancel := context.WithTimeout(ctx, attrsTimeout)
	defer cancel()
	return h.attrs.get(ctx, log, h.API, h.QueueURL, h.QueueRetention)
}

// process runs the batch through the consumer. The messages on their last
// receive (ApproximateReceiveCount at the queue's maxReceiveCount: handed
// back, they would move to the dead-letter queue at their next receive)
// go first and without waiting for their pacing slots
// (consume.Consumer.ProcessNow), so that a pacing deferral never spends a
// last receive; with the circuit open, the ones before their last go
// too, as its probe. At a rate of zero they are deferred all the same;
// failed, delay requeues them (Handler.MaxRequeues) or hands them back for
// as long as SQS allows (LastVisibility).
func (h *Handler) process(ctx context.Context, log *slog.Logger, msgs []consume.Message) consume.Report {
	_, maxReceive := h.queueLimits(ctx, log)
	// With the circuit open the one before the last goes now too, as a
	// probe: deferred untried it would be kept away for 12 h although the
	// destination may be well again (the circuit waits for its probe).
	// Not when that is every message's first or second receive.
	now := maxReceive
	if maxReceive >= 3 && h.Consumer.Breaker().State() == consume.CircuitOpen {
		now = maxReceive - 1
	}
	var last, rest []consume.Message
	for _, m := range msgs {
		if maxReceive > 0 && m.ReceiveCount >= now {
			last = append(last, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(last) == 0 {
		return h.Consumer.Process(ctx, msgs)
	}
	rep := h.Consumer.ProcessNow(ctx, last)
	if len(rest) > 0 {
		rep = merge(rep, h.Consumer.Process(ctx, rest))
	}
	return rep
}

// merge returns the report of two parts of one batch.
func merge(a, b consume.Report) consume.Report {
	a.Stored = append(a.Stored, b.Stored...)
	a.Retry = append(a.Retry, b.Retry...)
	a.Deferred = append(a.Deferred, b.Deferred...)
	a.Poison = append(a.Poison, b.Poison...)
	if a.Cause == "" {
		a.Cause = b.Cause
	}
	a.Outage, a.Paused = a.Outage || b.Outage, a.Paused || b.Paused
	a.DeferFor = max(a.DeferFor, b.DeferFor)
	a.Working += b.Working
	return a
}

// LastVisibility is the visibility of message m handed back (not requeued:
// Handler.MaxRequeues) when its next
// receive is its last one (or when it is on its last: the next receive
// moves it to the dead-letter queue): as long as SQS allows (12 h), at
// most what m has left of retention since it was sent, less
// retentionMargin; never less than short (the visibility it would get
// otherwise). Retention 0 (unknown), or m's sent time unknown, gives
// short: a visibility past the retention would lose the message.
func LastVisibility(m consume.Message, short, retention time.Duration, now time.Time) time.Duration {
	if retention <= 0 || m.SentAt.IsZero() {
		return short
	}
	return max(min(maxVisibility, retention-now.Sub(m.SentAt)-retentionMargin), short)
}

// lastReceives returns the messages handed back because the destination
// failed (Retry, and Deferred while it fails) whose next receive is their
// last, or who are on it: those delay requeues, or keeps for their last
// receive (keepLastReceives).
//
// A message deferred for its pacing slot keeps its slot: its last receive
// is stored whatever the pacing (process). So does one handed back at a
// rate of zero (the paused backoff): an operator's pause goes through the
// controller, which turns the event source mapping off, so that no
// receive is spent while paused; a bare RATE 0 with the mapping on keeps
// the paused backoff's bound (DefaultPausedBackoff), not 12 h.
func (h *Handler) lastReceives(ctx context.Context, log *slog.Logger, rep consume.Report, failing bool) []consume.Message {
	_, maxReceive := h.queueLimits(ctx, log)
	if maxReceive == 0 {
		return nil
	}
	back := rep.Retry
	if failing && !rep.Paused {
		back = append(append([]consume.Message{}, rep.Retry...), rep.Deferred...)
	}
	var last []consume.Message
	for _, m := range back {
		if m.ReceiveCount >= maxReceive-1 {
			last = append(last, m)
		}
	}
	return last
}

// keepLastReceives gives the messages of last (lastReceives) that were not
// requeued their LastVisibility in vis. It returns how many were on their
// last receive, spent.
func (h *Handler) keepLastReceives(ctx context.Context, log *slog.Logger, last []consume.Message, requeued map[string]bool, vis map[string]time.Duration) int {
	ret, maxReceive := h.queueLimits(ctx, log)
	now, spent := h.Consumer.Clock().Now(), 0
	for _, m := range last {
		if requeued[msgKey(m)] {
			continue
		}
		vis[msgKey(m)] = LastVisibility(m, vis[msgKey(m)], ret, now)
		if m.ReceiveCount >= maxReceive {
			spent++
		}
	}
	return spent
}
