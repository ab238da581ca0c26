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
// failed, delay hands them back for as long as SQS allows
// (LastVisibility).
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

// LastVisibility is the visibility of message m handed back when its next
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

// keepLastReceives gives the messages handed back because the destination
// failed (Retry, and Deferred while it fails) whose next receive is their
// last, or who are on it, their LastVisibility in vis. It returns how many
// were on their last receive, spent.
//
// A message deferred for its pacing slot keeps its slot: its last receive
// is stored whatever the pacing (process). So does one handed back at a
// rate of zero (the paused backoff): an operator's pause goes through the
// controller, which turns the event source mapping off, so that no
// receive is spent while paused; a bare RATE 0 with the mapping on keeps
// the paused backoff's bound (DefaultPausedBackoff), not 12 h.
func (h *Handler) keepLastReceives(ctx context.Context, log *slog.Logger, rep consume.Report, failing bool, vis map[string]time.Duration) int {
	ret, maxReceive := h.queueLimits(ctx, log)
	if maxReceive == 0 {
		return 0
	}
	now, spent := h.Consumer.Clock().Now(), 0
	back := rep.Retry
	if failing && !rep.Paused {
		back = append(append([]consume.Message{}, rep.Retry...), rep.Deferred...)
	}
	for _, m := range back {
		if m.ReceiveCount < maxReceive-1 {
			continue
		}
		vis[m.ID] = LastVisibility(m, vis[m.ID], ret, now)
		if m.ReceiveCount >= maxReceive {
			spent++
		}
	}
	return spent
}
