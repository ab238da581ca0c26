package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// How the dead-letter topic's refusals are met, on the worker (Source) and
// on the Lambda (TopicDeadLetters) alike:
//
//   - Retriable errors (NOT_ENOUGH_REPLICAS, LEADER_NOT_AVAILABLE,
//     REQUEST_TIMED_OUT, a topic being created) are retried by franz-go
//     itself, without limit; the produce is bounded by a timeout so that
//     the refusal is counted and logged instead of blocking silently, and
//     the dead letter is produced again later.
//   - A record too large for the topic (MESSAGE_TOO_LARGE: the dead letter
//     carries the original value plus the reason headers) can never be
//     taken as it is: it is produced alone (it may have been refused only
//     for the batch it was in), and if still too large, produced again
//     with its value cut to TruncatedValueBytes and HeaderTruncated telling
//     the original size. The poison is dead-lettered with its reason
//     rather than holding its partition for ever; the whole value stays in
//     the source topic, at the offset in HeaderOrigin, until retention.
//   - Other refusals (authorization, the topic missing with auto-creation
//     off, a record too large even cut) keep the record held: nothing is
//     dropped; they are counted and logged with the reason.

// producedDead is the outcome of one dead letter.
type producedDead struct {
	err error
	// cut is the original value's size when the dead letter went with its
	// value cut (0 otherwise).
	cut int
}

// tooLarge reports whether err is the topic (or the client's batch bound)
// refusing a record for its size.
func tooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// produceDead produces recs to the dead-letter topic, waiting at most
// timeout, and the too-large ones again alone then cut (see above).
func produceDead(ctx context.Context, cl *kgo.Client, timeout time.Duration, recs []*kgo.Record) []producedDead {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := make([]producedDead, len(recs))
	for i, r := range cl.ProduceSync(pctx, recs...) {
		out[i].err = r.Err
	}
	for i, r := range recs {
		if !tooLarge(out[i].err) {
			continue
		}
		if len(recs) > 1 {
			if out[i].err = cl.ProduceSync(pctx, r).FirstErr(); !tooLarge(out[i].err) {
				continue
			}
		}
		if len(r.Value) <= TruncatedValueBytes {
			continue // the key or headers are too large: nothing to cut
		}
		if out[i].err = cl.ProduceSync(pctx, CutDeadRecord(r)).FirstErr(); out[i].err == nil {
			out[i].cut = len(r.Value)
		}
	}
	for i := range out {
		if out[i].err != nil && pctx.Err() != nil && ctx.Err() == nil {
			out[i].err = fmt.Errorf("not taken within %v (franz-go retries retriable errors such as NOT_ENOUGH_REPLICAS, LEADER_NOT_AVAILABLE or REQUEST_TIMED_OUT until then): %w", timeout, out[i].err)
		}
	}
	return out
}

// CutDeadRecord returns the dead letter d with its value cut to
// TruncatedValueBytes and the header HeaderTruncated "value cut from N to
// M bytes": what is produced when the dead-letter topic refused d as too
// large.
func CutDeadRecord(d *kgo.Record) *kgo.Record {
	c := *d
	n := min(len(d.Value), TruncatedValueBytes)
	c.Value = d.Value[:n:n]
	c.Headers = append(d.Headers[:len(d.Headers):len(d.Headers)],
		kgo.RecordHeader{Key: HeaderTruncated, Value: fmt.Appendf(nil, "value cut from %d to %d bytes", len(d.Value), n)})
	return &c
}

// deadLetterKind names, for the logs, what kind of refusal err is.
func deadLetterKind(err error) string {
	var ke *kerr.Error
	switch {
	case tooLarge(err):
		return "too large even with its value cut (or with its key and headers alone): held until the topic's max.message.bytes is raised"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return "retriable, still failing at the timeout; produced again after a backoff"
	case errors.As(err, &ke) && ke.Retriable:
		return "retriable; produced again after a backoff"
	default:
		return "not retriable (authorization, the topic missing): held, produced again after a backoff, until an operator fixes the topic"
	}
}
