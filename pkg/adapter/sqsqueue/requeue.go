package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// RequeueAttribute is the message attribute of a copy the Lambda handler
// sent back to its own queue (Handler.MaxRequeues):
// "<requeues>:<original message id>", the number of times the message
// was requeued and the message id it had when it was first sent.
// FromEvent gives a copy's consume.Message the original id and leaves the
// attribute out of its Attributes.
const RequeueAttribute = "sluice-requeue"

// DefaultMaxRequeues is the default of Handler.MaxRequeues: 16 requeues.
// Through an outage that does not end, with the mapping polling all
// along and no controller holding it off, a copy spends about 43 minutes
// or more in the queue before its own last-but-one receive fails (15
// minutes of delay, then the open circuit's visibilities by the outage's
// age: 4, 8 and 16 minutes), so 16 requeues amount to about 11.5 hours at
// the least: about the 12 h that keeping a message for its last receive
// (LastVisibility) amounted to before requeues, which then follows
// (TestEndlessOutageEndsInTheDeadLetterQueue: the first dead letter 35 h
// 47 min after the outage's start, 24 h 19 min without requeues).
const DefaultMaxRequeues = 16

// maxDelay is SQS's limit on a message's DelaySeconds.
const maxDelay = 15 * time.Minute

// maxMessageBytes is the size SQS accepts for one message and for the
// sum of a SendMessageBatch's entries (256 KiB): a copy that would be
// larger, with the requeue attribute, is not requeued.
const maxMessageBytes = 256 * 1024

// maxAttributes is SQS's limit on a message's attributes.
const maxAttributes = 10

// requeueOf reads r's RequeueAttribute: the original message id and how
// many times the message was requeued; ok is false when r has none, or
// one that is not a count, a colon and an id.
func requeueOf(r events.SQSMessage) (id string, n int, ok bool) {
	a, found := r.MessageAttributes[RequeueAttribute]
	if !found || a.StringValue == nil {
		return "", 0, false
	}
	count, id, cut := strings.Cut(*a.StringValue, ":")
	n, err := strconv.Atoi(count)
	if !cut || err != nil || n < 1 || id == "" {
		return "", 0, false
	}
	return id, n, true
}

// requeueEntry is the SendMessageBatch entry of the copy of r requeued
// for the n-th time (id: the original message id), delayed by delay: r's
// body and attributes as they came, RequeueAttribute set. It returns
// false when the copy would not fit SQS's limits (ten attributes, 256
// KiB) or r has no body.
func requeueEntry(i int, r events.SQSMessage, id string, n int, delay time.Duration) (types.SendMessageBatchRequestEntry, int, bool) {
	attrs := make(map[string]types.MessageAttributeValue, len(r.MessageAttributes)+1)
	size := len(r.Body)
	for k, v := range r.MessageAttributes {
		if k == RequeueAttribute {
			continue
		}
		dt := v.DataType
		if dt == "" {
			dt = "String"
			if v.StringValue == nil {
				dt = "Binary"
			}
		}
		a := types.MessageAttributeValue{DataType: aws.String(dt)}
		if strings.HasPrefix(dt, "Binary") {
			a.BinaryValue = v.BinaryValue
			size += len(v.BinaryValue)
		} else {
			a.StringValue = aws.String(aws.ToString(v.StringValue))
			size += len(aws.ToString(v.StringValue))
		}
		attrs[k] = a
		size += len(k) + len(dt)
	}
	mark := fmt.Sprintf("%d:%s", n, id)
	attrs[RequeueAttribute] = stringAttr(mark)
	size += len(RequeueAttribute) + len("String") + len(mark)
	if r.Body == "" || len(attrs) > maxAttributes || size > maxMessageBytes {
		return types.SendMessageBatchRequestEntry{}, 0, false
	}
	return types.SendMessageBatchRequestEntry{
		Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(r.Body), MessageAttributes: attrs,
		DelaySeconds: int32(min(max(delay, 0), maxDelay) / time.Second),
	}, size, true
}

// requeue sends a copy of each of msgs (messages whose next receive is
// their last, or on it, handed back because the destination fails) to
// the handler's own queue, delayed by the visibility it would otherwise
// get (vis, at most SQS's 15 minutes), and returns the keys (msgKey) of
// those SQS took: the handler then reports them as handled, and the
// mapping deletes the originals. The copy has a fresh receive count, so
// the fault does not spend the message's last receive; it keeps the
// original message id (RequeueAttribute) for the sinks' idempotency.
//
// Not requeued, and so kept as before (LastVisibility): on a FIFO queue
// (a copy would lose its group's order and its deduplication), with
// MaxRequeues negative, a message requeued MaxRequeues times already, one
// whose record is unknown, one that would not fit SQS's limits with the
// attribute, and one SQS refused (the call or its entry failed).
func (h *Handler) requeue(ctx context.Context, log *slog.Logger, msgs []consume.Message, vis map[string]time.Duration, recs map[string]events.SQSMessage) map[string]bool {
	if len(msgs) == 0 || h.MaxRequeues < 0 || strings.HasSuffix(h.QueueURL, ".fifo") {
		return nil
	}
	limit := h.MaxRequeues
	if limit == 0 {
		limit = DefaultMaxRequeues
	}
	type copyOf struct {
		key   string
		entry types.SendMessageBatchRequestEntry
		size  int
	}
	var copies []copyOf
	capped := 0
	for _, m := range msgs {
		r, ok := recs[receipt(m)]
		if !ok {
			continue
		}
		_, n, _ := requeueOf(r)
		if n >= limit {
			capped++
			continue
		}
		e, size, ok := requeueEntry(len(copies), r, m.ID, n+1, vis[msgKey(m)])
		if !ok {
			log.WarnContext(ctx, "message not requeued: the copy would exceed SQS's limits (256 KiB, 10 attributes); kept for its last receive", "id", m.ID)
			continue
		}
		copies = append(copies, copyOf{msgKey(m), e, size})
	}
	if capped > 0 {
		log.WarnContext(ctx, "messages requeued MaxRequeues times already: kept for their last receive instead", "messages", capped, "max_requeues", limit)
	}
	done := map[string]bool{}
	var errs []error
	for len(copies) > 0 {
		// A batch of at most 10 entries and 256 KiB in all.
		n, size := 0, 0
		for n < len(copies) && n < 10 && (n == 0 || size+copies[n].size <= maxMessageBytes) {
			size += copies[n].size
			n++
		}
		batch := copies[:n]
		copies = copies[n:]
		entries := make([]types.SendMessageBatchRequestEntry, len(batch))
		for i, c := range batch {
			entries[i] = c.entry
			entries[i].Id = aws.String(strconv.Itoa(i))
		}
		out, err := h.API.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &h.QueueURL, Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("requeue %d messages to %s: %w", len(batch), h.QueueURL, err))
			continue
		}
		for _, s := range out.Successful {
			if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < len(batch) {
				done[batch[i].key] = true
			}
		}
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("requeue message %s: %s %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		log.WarnContext(ctx, "requeue refused; the messages are kept for their last receive instead", "err", err)
	}
	return done
}
