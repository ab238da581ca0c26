package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// queueAttributes are the queue's MessageRetentionPeriod and its redrive
// policy's maxReceiveCount, read once with one GetQueueAttributes call.
type queueAttributes struct {
	once       sync.Once
	retention  time.Duration // 0: unknown
	maxReceive int           // 0: no redrive policy, or unknown: no cap
}

// get reads the attributes of queueURL the first time (the retention 0
// and no cap when it cannot); fallback is the retention when SQS answers
// without it (a stand-in such as ElasticMQ, which does not report it).
func (a *queueAttributes) get(ctx context.Context, log *slog.Logger, api API, queueURL string, fallback time.Duration) (time.Duration, int) {
	a.once.Do(func() {
		a.retention = fallback
		out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMessageRetentionPeriod, types.QueueAttributeNameRedrivePolicy}})
		if err == nil {
			a.maxReceive = a.readMaxReceive(ctx, log, out.Attributes[string(types.QueueAttributeNameRedrivePolicy)])
			secs, perr := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameMessageRetentionPeriod)])
			if perr == nil && secs > 0 {
				a.retention = time.Duration(secs) * time.Second
				return
			}
			err = errors.New("the queue's attributes have no MessageRetentionPeriod")
		}
		if a.retention == 0 {
			log.WarnContext(ctx, "the queue's retention is unknown (set SLUICE_QUEUE_RETENTION); messages handed back with an open circuit get the retry backoff, and the one before a last receive is not kept away longer", "err", err)
		}
	})
	return a.retention, a.maxReceive
}

// readMaxReceive returns the maxReceiveCount of a RedrivePolicy ("" for
// none: 0), logging a policy it cannot read.
func (a *queueAttributes) readMaxReceive(ctx context.Context, log *slog.Logger, policy string) int {
	if policy == "" {
		return 0
	}
	n, err := MaxReceiveCount(policy)
	if err != nil {
		log.WarnContext(ctx, "the queue's redrive policy cannot be read; its maxReceiveCount is taken for no cap, and no message's last receive is kept", "policy", policy, "err", err)
	}
	return n
}

// MaxReceiveCount returns the maxReceiveCount of a queue's RedrivePolicy
// attribute, the JSON string GetQueueAttributes answers
// ({"deadLetterTargetArn":"...","maxReceiveCount":5}); AWS has answered the
// count as a number and as a string, and both are read.
func MaxReceiveCount(policy string) (int, error) {
	var p struct {
		MaxReceiveCount json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		return 0, fmt.Errorf("redrive policy: %w", err)
	}
	raw := p.MaxReceiveCount
	if len(raw) > 1 && raw[0] == '"' {
		raw = raw[1 : len(raw)-1]
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("redrive policy: maxReceiveCount %s: want a positive integer", p.MaxReceiveCount)
	}
	return n, nil
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
	ret, _ := h.queueLimits(ctx, log)
	now, age := h.Consumer.Clock().Now(), h.Consumer.Breaker().FailingFor()
	for _, m := range back {
		vis[msgKey(m)] = OpenVisibility(b, m, vis[msgKey(m)], ret, now, max(age, h.waited(m, now)))
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
