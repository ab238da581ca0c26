package sqsqueue

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// DefaultOpenBackoff returns the visibility of a message handed back while
// the consumer's circuit is open: 4 minutes at the first receive, doubling
// with the receive count (equal jitter), at most an hour. A message
// received at an outage's start thus stays away for minutes, and the
// controller has held the mapping off before it comes back a second time;
// without a controller, five receives span about an hour instead of the
// retry backoff's 8 to 15 minutes.
func DefaultOpenBackoff() consume.Backoff {
	return consume.Backoff{Base: 4 * time.Minute, Max: time.Hour}
}

// retentionMargin is kept between a message's visibility and the end of
// its retention, so that it is received at least once more before SQS
// deletes it.
const retentionMargin = time.Minute

// retention is the queue's MessageRetentionPeriod, read once.
type retention struct {
	once sync.Once
	d    time.Duration // 0: unknown
}

// get reads the retention of queueURL the first time (0 when it cannot);
// fallback is the retention when SQS answers without it (a stand-in such
// as ElasticMQ, which does not report it).
func (r *retention) get(ctx context.Context, log *slog.Logger, api API, queueURL string, fallback time.Duration) time.Duration {
	r.once.Do(func() {
		r.d = fallback
		out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMessageRetentionPeriod}})
		if err == nil {
			secs, perr := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMessageRetentionPeriod)])
			if perr == nil && secs > 0 {
				r.d = time.Duration(secs) * time.Second
				return
			}
			err = errors.New("the queue's attributes have no MessageRetentionPeriod")
		}
		if r.d == 0 {
			log.WarnContext(ctx, "the queue's retention is unknown (set SLUICE_QUEUE_RETENTION); messages handed back with an open circuit get the retry backoff", "err", err)
		}
	})
	return r.d
}

// OpenVisibility is the visibility of message m handed back while the
// circuit is open: b by its receive count, at most SQS's 12 h, and at most
// what m has left of retention (less retentionMargin) since it was sent;
// never less than short (the visibility it would get otherwise). A
// retention of 0 (unknown) gives short.
func OpenVisibility(b consume.Backoff, m consume.Message, short, retention time.Duration, now time.Time) time.Duration {
	if retention <= 0 {
		return short
	}
	d := min(b.EqualJitter(max(m.ReceiveCount, 1)), maxVisibility)
	if !m.SentAt.IsZero() {
		d = min(d, retention-now.Sub(m.SentAt)-retentionMargin)
	}
	return max(d, short)
}

// openVisibility gives the messages handed back while the circuit is open
// their OpenVisibility in vis.
func (h *Handler) openVisibility(ctx context.Context, log *slog.Logger, back []consume.Message, vis map[string]time.Duration) {
	b := h.OpenBackoff
	if b.Base <= 0 {
		b = DefaultOpenBackoff()
	}
	ret := h.retention.get(ctx, log, h.API, h.QueueURL, h.QueueRetention)
	now := time.Now()
	for _, m := range back {
		vis[m.ID] = OpenVisibility(b, m, vis[m.ID], ret, now)
	}
}
