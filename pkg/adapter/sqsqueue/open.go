package sqsqueue

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// DefaultOpenBackoff returns the long backoff of a message handed back
// while the consumer's circuit is open: 4 minutes at the first receive,
// doubling with the receive count, at most an hour. OpenVisibility reaches
// it only in a long outage; a message handed back in an outage's first
// seconds stays away for about 30 s (see OpenVisibility).
func DefaultOpenBackoff() consume.Backoff {
	return consume.Backoff{Base: 4 * time.Minute, Max: time.Hour}
}

// openFirst is the share of the long backoff's first wait that is the
// shortest visibility of a message handed back with the circuit open (30 s
// of the default 4 min): a blip of a few seconds is over by then, and the
// circuit's probe has closed it. A share, so that a backoff scaled down
// (the short chaos runs) scales it alike.
const openFirst = 8

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
// circuit is open and the destination has been failing for age (the
// outage's age, consume.Breaker.FailingFor): the age at the first receive
// (an outage that has lasted a while is likely to last as long again),
// four times more at each further one, at least an eighth of b.Base (30 s
// by default), at most b's long backoff by the receive count (b.Ceiling);
// then up to a quarter more, drawn by b's jitter (at most b.Max), to
// spread the returns without shortening any. It is at most SQS's 12 h, and
// at most what m has left of retention (less retentionMargin) since it
// was sent; never less than short (the visibility it would get
// otherwise). A retention of 0 (unknown) gives short.
//
// A blip of seconds so costs seconds: what it hands back returns within
// about a minute. The factor per receive makes a long outage cost few
// receives, by a mapping that polls all along: a message failed at an
// outage's start (the retry backoff, 15 s at the least) is received again
// at 15 s (1 min: 15 s x 4), at 1 min 15 s (the long backoff, 16 min),
// and a fourth time after 17 minutes: 3 receives in a 15-minute outage,
// where maxReceiveCount is 5.
func OpenVisibility(b consume.Backoff, m consume.Message, short, retention time.Duration, now time.Time, age time.Duration) time.Duration {
	if retention <= 0 {
		return short
	}
	n := max(m.ReceiveCount, 1)
	long := b.Ceiling(n)
	d := min(max(age, 0), long)
	for i := 1; i < n && d < long; i++ {
		d = min(4*d, long)
	}
	d = max(d, b.Ceiling(1)/openFirst)
	top := b.Ceiling(math.MaxInt32) // b.Max, or its default
	d = min(d+spread(b, d/4), max(d, top), maxVisibility)
	if !m.SentAt.IsZero() {
		d = min(d, retention-now.Sub(m.SentAt)-retentionMargin)
	}
	return max(d, short)
}

// spread returns a wait in [0, c]: b's jitter, else uniform.
func spread(b consume.Backoff, c time.Duration) time.Duration {
	if b.Jitter != nil {
		return min(max(b.Jitter(c), 0), c)
	}
	return rand.N(c + 1)
}

// openVisibility gives the messages handed back while the circuit is open
// their OpenVisibility in vis.
func (h *Handler) openVisibility(ctx context.Context, log *slog.Logger, back []consume.Message, vis map[string]time.Duration) {
	b := h.OpenBackoff
	if b.Base <= 0 {
		b = DefaultOpenBackoff()
	}
	ret := h.retention.get(ctx, log, h.API, h.QueueURL, h.QueueRetention)
	now, age := h.Consumer.Clock().Now(), h.Consumer.Breaker().FailingFor()
	for _, m := range back {
		vis[m.ID] = OpenVisibility(b, m, vis[m.ID], ret, now, max(age, h.waited(m, now)))
	}
}

// waited is how long m has waited since its first receive when that was
// before this instance's first invocation (0 otherwise): what the instance
// cannot know of the outage from its own failures. A Lambda instance
// started during an outage (the mapping scales and recycles its instances)
// sees the destination fail from its first batch on, and would take the
// outage for one that has just begun. The wait overstates an outage's age
// for a message that was received and deferred for its pacing slot before
// the outage began; it then stays away longer (at most the long backoff by
// its receive count), which costs time, not the message.
func (h *Handler) waited(m consume.Message, now time.Time) time.Duration {
	if m.ReceiveCount < 2 || m.FirstReceivedAt.IsZero() || !m.FirstReceivedAt.Before(h.started) {
		return 0
	}
	return max(now.Sub(m.FirstReceivedAt), 0)
}
