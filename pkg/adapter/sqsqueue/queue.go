// Package sqsqueue is the Amazon SQS source of consumers: long-polling
// receive, delete after store, visibility extension while a batch is held
// (pacing or a slow sink), release (visibility 0) of what was not stored, and
// dead-lettering of poison messages with their reason. It also adapts the
// SQS event of a Lambda event source mapping to a consumer batch.
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/consume"
)

var (
	_ consume.Source       = (*Queue)(nil)
	_ consume.DeadLetterer = (*Queue)(nil)
	_ consume.Retrier      = (*Queue)(nil)
)

// DefaultRetryBackoff returns the visibility of a message whose destination
// failed, by its receive count (equal jitter): 15-30 s after the first
// receive, doubling to 120-240 s after the fourth, at most 15 minutes. With
// a maxReceiveCount of 5 a healthy message survives a destination outage of
// at least 225 s (the sum of the first four visibilities at their least)
// even when it is received as often as it becomes visible, as a Lambda's
// event source mapping does; the worker's circuit breaker receives far
// less. The Lambda's Handler hands a message back for longer while the
// destination fails (OpenVisibility), and before its last receive
// requeues it (Handler.MaxRequeues) or keeps it for 12 h (LastVisibility).
func DefaultRetryBackoff() consume.Backoff {
	return consume.Backoff{Base: 30 * time.Second, Max: 15 * time.Minute}
}

// DefaultPausedBackoff returns the visibility of a message handed back untried
// while the rate is zero, by its receive count: 30-60 s after the first
// receive, 240-480 s after the fourth. With a maxReceiveCount of 5 a pause of
// up to 450 s (7.5 minutes) never dead-letters a healthy message; for longer
// pauses disable the event source mapping (the controller does on an
// operator's pause) or raise maxReceiveCount.
func DefaultPausedBackoff() consume.Backoff {
	return consume.Backoff{Base: time.Minute, Max: 15 * time.Minute}
}

// maxVisibility is SQS's limit on a visibility timeout.
const maxVisibility = 12 * time.Hour

// RetryVisibility is how long a message whose destination failed stays
// invisible: b's equal jitter by its receive count.
func RetryVisibility(b consume.Backoff, m consume.Message) time.Duration {
	return min(b.EqualJitter(max(m.ReceiveCount, 1)), maxVisibility)
}

// ReasonAttribute is the message attribute that carries a dead-lettered
// message's reason.
const ReasonAttribute = "sluice-dead-letter-reason"

// API is the part of the SQS client that Queue uses; *sqs.Client has it.
type API interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Config configures a Queue.
type Config struct {
	// QueueURL is the queue consumed.
	QueueURL string
	// DeadLetterURL is where poison messages go, with ReasonAttribute. When
	// empty, poison messages are released instead and the queue's redrive
	// policy moves them to its DLQ after maxReceiveCount.
	DeadLetterURL string
	// WaitTime is the long-polling wait (default and maximum 20 s).
	WaitTime time.Duration
	// Visibility is the visibility timeout asked on receive and renewed
	// every Visibility/3 while a message is held (default 30 s).
	Visibility time.Duration
	// RetryBackoff sets the visibility of a message whose destination
	// failed, by its receive count (default DefaultRetryBackoff).
	RetryBackoff consume.Backoff
	// CallTimeout bounds each SQS call beyond its long-poll wait (default
	// 10 s), whatever the caller's context: on a connection that hangs
	// without an answer (a frozen endpoint, a dead NAT entry) the call
	// fails and the caller's retry opens a new one.
	CallTimeout time.Duration
}

// Queue is an SQS queue as a consume.Source. Call Close when done, to stop
// the visibility extender.
type Queue struct {
	api API
	cfg Config
	log *slog.Logger

	// extending is held while the extender renews visibility, and by
	// forget, so that a release never races with a renewal that would
	// hide the released message again.
	extending sync.Mutex
	mu        sync.Mutex
	held      map[string]struct{} // receipt handles received, not yet settled
	// dlqFailures counts the poison messages the dead-letter queue refused.
	dlqFailures atomic.Int64
	stop        chan struct{}
	once        sync.Once
	wg          sync.WaitGroup
}

// New returns a Queue and starts its visibility extender. log may be nil.
func New(api API, cfg Config, log *slog.Logger) *Queue {
	if cfg.WaitTime <= 0 || cfg.WaitTime > 20*time.Second {
		cfg.WaitTime = 20 * time.Second
	}
	cfg.Visibility = defaults.Positive(cfg.Visibility, 30*time.Second)
	cfg.CallTimeout = defaults.Positive(cfg.CallTimeout, 10*time.Second)
	if cfg.RetryBackoff.Base <= 0 {
		cfg.RetryBackoff = DefaultRetryBackoff()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{api: api, cfg: cfg, log: log, held: map[string]struct{}{}, stop: make(chan struct{})}
	q.wg.Add(1)
	go q.extendLoop()
	return q
}

// Close stops the visibility extender. Messages still held come back after
// their visibility timeout.
func (q *Queue) Close() {
	q.once.Do(func() { close(q.stop) })
	q.wg.Wait()
}

// Held returns how many received messages are neither acknowledged nor
// released.
func (q *Queue) Held() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.held)
}

// call bounds one SQS call by wait (its long poll) and CallTimeout.
func (q *Queue) call(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, wait+q.cfg.CallTimeout)
}

// Receive long-polls for up to max (at most 10) messages. A receive that
// gets no answer within WaitTime and CallTimeout fails.
func (q *Queue) Receive(ctx context.Context, n int) ([]consume.Message, error) {
	n = min(max(n, 1), 10)
	cctx, cancel := q.call(ctx, q.cfg.WaitTime)
	defer cancel()
	out, err := q.api.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &q.cfg.QueueURL,
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             int32(q.cfg.WaitTime / time.Second),
		VisibilityTimeout:           int32(q.cfg.Visibility / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("receive from %s: %w", q.cfg.QueueURL, err)
	}
	msgs := make([]consume.Message, 0, len(out.Messages))
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range out.Messages {
		cm := FromSQS(m)
		q.held[aws.ToString(m.ReceiptHandle)] = struct{}{}
		msgs = append(msgs, cm)
	}
	return msgs, nil
}

// FromSQS converts an SDK message. Handle is the receipt handle.
func FromSQS(m types.Message) consume.Message {
	cm := consume.Message{
		ID:     aws.ToString(m.MessageId),
		Body:   []byte(aws.ToString(m.Body)),
		Handle: aws.ToString(m.ReceiptHandle),
	}
	if n, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
		cm.ReceiveCount = n
	}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		cm.SentAt = time.UnixMilli(ms)
	}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp)], 10, 64); err == nil {
		cm.FirstReceivedAt = time.UnixMilli(ms)
	}
	if len(m.MessageAttributes) > 0 {
		cm.Attributes = map[string]string{}
		for k, v := range m.MessageAttributes {
			cm.Attributes[k] = aws.ToString(v.StringValue)
		}
	}
	return cm
}

func receipt(m consume.Message) string {
	s, _ := m.Handle.(string)
	return s
}

func (q *Queue) forget(msgs []consume.Message) {
	q.extending.Lock()
	defer q.extending.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		delete(q.held, receipt(m))
	}
}

// chunks splits msgs into SQS batches of at most 10.
func chunks[T any](xs []T) [][]T {
	var out [][]T
	for len(xs) > 10 {
		out = append(out, xs[:10])
		xs = xs[10:]
	}
	if len(xs) > 0 {
		out = append(out, xs)
	}
	return out
}

// Ack deletes stored messages. They are forgotten first, so that the
// extender does not renew a receipt handle being deleted; a failed delete
// lets them come back after the visibility timeout, and the idempotent sink
// absorbs the repeat.
func (q *Queue) Ack(ctx context.Context, msgs []consume.Message) error {
	q.forget(msgs)
	return inBatches(msgs, "delete", func(batch []consume.Message) ([]types.BatchResultErrorEntry, error) {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
		for i, m := range batch {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(receipt(m))}
		}
		cctx, cancel := q.call(ctx, 0)
		defer cancel()
		out, err := q.api.DeleteMessageBatch(cctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q.cfg.QueueURL, Entries: entries})
		if err != nil {
			return nil, err
		}
		return out.Failed, nil
	})
}

// inBatches sends msgs in SQS batches of at most 10 with send, and joins
// the errors of the calls that failed and of the entries SQS refused, each
// saying what was done ("delete") to how many messages or to which one.
func inBatches(msgs []consume.Message, what string, send func(batch []consume.Message) ([]types.BatchResultErrorEntry, error)) error {
	var errs []error
	for _, batch := range chunks(msgs) {
		failed, err := send(batch)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %d messages: %w", what, len(batch), err))
			continue
		}
		for _, f := range failed {
			errs = append(errs, fmt.Errorf("%s message %s: %s %s", what, aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	return errors.Join(errs...)
}

// Release makes messages visible again at once, for redelivery (messages
// not tried: shutdown, pacing cut short).
func (q *Queue) Release(ctx context.Context, msgs []consume.Message) error {
	q.forget(msgs)
	return q.changeVisibility(ctx, msgs, 0)
}

// Retry gives back messages whose destination failed, each invisible for
// RetryVisibility (growing with its ApproximateReceiveCount), so that an
// outage does not spend maxReceiveCount faster than it lasts.
func (q *Queue) Retry(ctx context.Context, msgs []consume.Message, _ string) error {
	q.forget(msgs)
	ctx, cancel := q.call(ctx, 0)
	defer cancel()
	return ChangeVisibility(ctx, q.api, q.cfg.QueueURL, msgs, func(m consume.Message) time.Duration {
		return RetryVisibility(q.cfg.RetryBackoff, m)
	})
}

func (q *Queue) changeVisibility(ctx context.Context, msgs []consume.Message, d time.Duration) error {
	ctx, cancel := q.call(ctx, 0)
	defer cancel()
	return ChangeVisibility(ctx, q.api, q.cfg.QueueURL, msgs, func(consume.Message) time.Duration { return d })
}

// ChangeVisibility sets the visibility timeout of each message (by its
// receipt handle) to vis(message), in batches of 10.
func ChangeVisibility(ctx context.Context, api API, queueURL string, msgs []consume.Message, vis func(consume.Message) time.Duration) error {
	return inBatches(msgs, "change visibility of", func(batch []consume.Message) ([]types.BatchResultErrorEntry, error) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
		for i, m := range batch {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(receipt(m)),
				VisibilityTimeout: int32(min(max(vis(m), 0), maxVisibility) / time.Second),
			}
		}
		out, err := api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &queueURL, Entries: entries})
		if err != nil {
			return nil, err
		}
		return out.Failed, nil
	})
}

// DeadLetter sends poison messages to DeadLetterURL with their reason, then
// deletes them from the queue. Without DeadLetterURL it releases them, and
// the queue's redrive policy moves them after maxReceiveCount.
//
// When the dead-letter queue refuses some (KMS access denied, a deleted
// queue, a batch over SQS's size limit), those are given back with the
// retry backoff, not held: held, their visibility would be renewed
// forever and in-flight messages would grow to SQS's limit. They come
// back, and after maxReceiveCount receives the redrive policy moves them
// (without their reason: nothing is lost). Each is counted in
// DeadLetterFailures and logged at error level, for an alarm.
func (q *Queue) DeadLetter(ctx context.Context, poison []consume.Poison) error {
	ms := make([]consume.Message, len(poison))
	for i, p := range poison {
		ms[i] = p.Message
	}
	if q.cfg.DeadLetterURL == "" {
		return q.Release(ctx, ms)
	}
	sctx, cancel := q.call(ctx, 0)
	sent, err := SendDeadLetters(sctx, q.api, q.cfg.DeadLetterURL, poison)
	cancel()
	if len(sent) > 0 {
		if aerr := q.Ack(ctx, sent); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}
	if unsent := without(ms, sent); len(unsent) > 0 {
		q.dlqFailures.Add(int64(len(unsent)))
		q.log.Error("dead-letter queue refused messages; given back for redelivery, the redrive policy moves them after maxReceiveCount",
			"dead_letter_queue", q.cfg.DeadLetterURL, "messages", len(unsent), "err", err)
		if rerr := q.Retry(ctx, unsent, "dead-letter queue refused"); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// DeadLetterFailures returns how many poison messages the dead-letter
// queue refused since New (each given back for redelivery): a count to
// alarm on.
func (q *Queue) DeadLetterFailures() int64 { return q.dlqFailures.Load() }

// without returns the messages of ms that are not in sent, by msgKey
// (their receipt handle).
func without(ms, sent []consume.Message) []consume.Message {
	done := make(map[string]bool, len(sent))
	for _, m := range sent {
		done[msgKey(m)] = true
	}
	var out []consume.Message
	for _, m := range ms {
		if !done[msgKey(m)] {
			out = append(out, m)
		}
	}
	return out
}

// OriginalIDAttribute is the message attribute that carries a
// dead-lettered message's original id.
const OriginalIDAttribute = "sluice-original-id"

// SendDeadLetters sends poison messages to the dead-letter queue at url, each
// with its original message attributes, its reason in ReasonAttribute and
// its original id in OriginalIDAttribute; it returns the messages that were
// sent. SQS allows 10 attributes per message: of the original ones, the
// first 8 by name are kept (7 when the body had to be encoded), those
// whose names SQS accepts; a value that is not text SQS accepts goes as a
// Binary attribute, and such a body as base64 with BodyEncodingAttribute.
func SendDeadLetters(ctx context.Context, api API, url string, poison []consume.Poison) ([]consume.Message, error) {
	var sent []consume.Message
	var errs []error
	for _, batch := range chunks(poison) {
		entries := make([]types.SendMessageBatchRequestEntry, len(batch))
		for i, p := range batch {
			entries[i] = deadLetterEntry(i, p)
		}
		out, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("send %d dead letters to %s: %w", len(batch), url, err))
			continue
		}
		for _, s := range out.Successful {
			i, _ := strconv.Atoi(aws.ToString(s.Id))
			sent = append(sent, batch[i].Message)
		}
		for _, f := range out.Failed {
			errs = append(errs, fmt.Errorf("send dead letter %s: %s %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	return sent, errors.Join(errs...)
}

// Depth returns the approximate number of visible messages in the queue.
func (q *Queue) Depth(ctx context.Context) (int, error) {
	ctx, cancel := q.call(ctx, 0)
	defer cancel()
	out, err := q.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       &q.cfg.QueueURL,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, fmt.Errorf("queue depth of %s: %w", q.cfg.QueueURL, err)
	}
	n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	if err != nil {
		return 0, fmt.Errorf("queue depth of %s: %w", q.cfg.QueueURL, err)
	}
	return n, nil
}

// extendLoop renews the visibility of held messages every Visibility/3, so
// that a batch held for pacing or a slow sink is not redelivered meanwhile.
func (q *Queue) extendLoop() {
	defer q.wg.Done()
	t := time.NewTicker(q.cfg.Visibility / 3)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-t.C:
		}
		q.extendHeld()
	}
}

func (q *Queue) extendHeld() {
	q.extending.Lock()
	defer q.extending.Unlock()
	q.mu.Lock()
	msgs := make([]consume.Message, 0, len(q.held))
	for h := range q.held {
		msgs = append(msgs, consume.Message{Handle: h})
	}
	q.mu.Unlock()
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.Visibility/3)
	defer cancel()
	if err := q.changeVisibility(ctx, msgs, q.cfg.Visibility); err != nil {
		q.log.Warn("extend visibility", "messages", len(msgs), "err", err)
	}
}

// DeadLetterQueue sends poison messages to the queue URL with their reason
// (SendDeadLetters); it serves consumers whose source has no dead-letter
// queue of its own, such as the Kafka Lambda.
type DeadLetterQueue struct {
	API API
	URL string
}

// SendDeadLetters sends poison to the queue and returns those it took.
func (q DeadLetterQueue) SendDeadLetters(ctx context.Context, poison []consume.Poison) ([]consume.Message, error) {
	return SendDeadLetters(ctx, q.API, q.URL, poison)
}
