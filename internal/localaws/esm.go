package localaws

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// SQSAPI is the part of the SQS client the poller uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Poller is the SQS event source mapping: it long-polls a queue for up to
// BatchSize messages, invokes the function with them as one SQS event, and
// then deletes every message the function did not report in
// batchItemFailures. When the invocation fails (a function error, a
// timeout), or the response names a failure it cannot match to a message,
// the whole batch counts as failed and nothing is deleted, as AWS does: the
// messages come back after their visibility timeout, and the queue's redrive
// policy moves them to the dead-letter queue after maxReceiveCount receives.
type Poller struct {
	API      SQSAPI
	Invoker  Invoker
	QueueURL string
	// QueueARN is each record's eventSourceARN (default: derived from the
	// queue URL with Region and the URL's account).
	QueueARN string
	Region   string
	// BatchSize is the largest batch (1 to 10; default 10).
	BatchSize int
	// Wait is the long-poll wait (default 1s; at most 20s).
	Wait time.Duration
	Log  *slog.Logger
	// OnBatch, when set, sees every batch's outcome.
	OnBatch func(BatchResult)
}

// BatchResult is the outcome of one poll.
type BatchResult struct {
	// Received is the number of messages received; Deleted and Failed how
	// many were deleted and left for redelivery.
	Received, Deleted, Failed int
	// IDs are the received message ids, FailedIDs those left in the queue.
	IDs, FailedIDs []string
	// InvokeErr is the invocation's error (the whole batch failed).
	InvokeErr error
	// Took is how long the invocation took, as the poller timed it;
	// Billed is Took rounded up to the millisecond, as Lambda bills.
	Took, Billed time.Duration
}

// BilledDuration is d rounded up to the next millisecond: what Lambda bills
// for an invocation that ran d.
func BilledDuration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

func (p *Poller) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

// Run polls until ctx ends. Errors of the SQS API are logged and retried
// after a second.
func (p *Poller) Run(ctx context.Context) error { return p.RunUntil(ctx, nil) }

// RunUntil polls until ctx ends or stop is closed; a batch received before
// stop was closed is invoked and settled first (the mapping scaling down
// never drops an in-flight batch).
func (p *Poller) RunUntil(ctx context.Context, stop <-chan struct{}) error {
	if p.API == nil || p.Invoker == nil || p.QueueURL == "" {
		return fmt.Errorf("sqs poller: API, Invoker and QueueURL must be set")
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for ctx.Err() == nil && !stopped() {
		if _, err := p.PollOnce(ctx); err != nil && ctx.Err() == nil {
			p.log().WarnContext(ctx, "sqs poll", "queue", p.QueueURL, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// PollOnce receives one batch, invokes the function with it and deletes
// what was processed. An empty receive returns a zero result.
func (p *Poller) PollOnce(ctx context.Context) (BatchResult, error) {
	size := p.BatchSize
	if size <= 0 || size > 10 {
		size = 10
	}
	wait := defaults.Positive(p.Wait, time.Second)
	out, err := p.API.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         int32(size),
		WaitTimeSeconds:             int32(min(wait, 20*time.Second) / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return BatchResult{}, fmt.Errorf("receive from %s: %w", p.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return BatchResult{}, nil
	}
	ev := p.Event(out.Messages)
	res := BatchResult{Received: len(out.Messages)}
	for _, r := range ev.Records {
		res.IDs = append(res.IDs, r.MessageId)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return res, fmt.Errorf("encode SQS event: %w", err)
	}
	failed := map[string]bool{}
	// A received batch is invoked and settled even when ctx ends
	// meanwhile (shutdown, a scale-down): it is never dropped in flight.
	ctx = context.WithoutCancel(ctx)
	start := time.Now()
	body, err := p.Invoker.Invoke(ctx, payload)
	res.Took = time.Since(start)
	res.Billed = BilledDuration(res.Took)
	p.log().InfoContext(ctx, "invocation", "queue", p.QueueURL, "messages", res.Received,
		"duration_ms", float64(res.Took)/float64(time.Millisecond), "billed_ms", res.Billed.Milliseconds(), "error", err != nil)
	if err == nil {
		failed, err = FailedItems(body, res.IDs)
	}
	if err != nil {
		// The whole batch failed: leave every message to its visibility
		// timeout.
		res.InvokeErr = err
		res.Failed, res.FailedIDs = len(res.IDs), res.IDs
		p.log().WarnContext(ctx, "sqs batch failed; messages return after their visibility timeout", "messages", res.Received, "err", err)
		p.report(res)
		return res, nil
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		if failed[id] {
			res.FailedIDs = append(res.FailedIDs, id)
			continue
		}
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
	}
	res.Failed = len(res.FailedIDs)
	if len(del) > 0 {
		dout, err := p.API.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: del})
		if err != nil {
			// Not deleted: the messages come back and the function, which
			// is idempotent, sees them again.
			p.report(res)
			return res, fmt.Errorf("delete %d processed messages: %w", len(del), err)
		}
		res.Deleted = len(dout.Successful)
		for _, f := range dout.Failed {
			p.log().WarnContext(ctx, "delete failed; the message will be redelivered", "entry", aws.ToString(f.Id), "code", aws.ToString(f.Code), "message", aws.ToString(f.Message))
		}
	}
	p.report(res)
	return res, nil
}

func (p *Poller) report(res BatchResult) {
	if p.OnBatch != nil {
		p.OnBatch(res)
	}
}

// FailedItems decodes a function's SQS batch response and returns the ids
// it reported as failed. An empty or null response means every message
// succeeded. An item identifier that is empty or not one of ids fails the
// whole batch (an error), as the event source mapping does.
func FailedItems(body []byte, ids []string) (map[string]bool, error) {
	failed := map[string]bool{}
	t := strings.TrimSpace(string(body))
	if t == "" || t == "null" || t == "{}" {
		return failed, nil
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal([]byte(t), &resp); err != nil {
		// Any other response shape counts as success, as for a function
		// that does not report batch item failures.
		return failed, nil
	}
	known := make(map[string]bool, len(ids))
	for _, id := range ids {
		known[id] = true
	}
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" || !known[f.ItemIdentifier] {
			return nil, fmt.Errorf("batch response names item %q, which is not in the batch: the whole batch counts as failed", f.ItemIdentifier)
		}
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

// Event builds the SQS event the mapping sends for msgs.
func (p *Poller) Event(msgs []types.Message) events.SQSEvent {
	region := p.Region
	if region == "" {
		region = DefaultRegion
	}
	arn := p.QueueARN
	if arn == "" {
		arn = QueueARN(p.QueueURL, region)
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		body := aws.ToString(m.Body)
		md5Body := aws.ToString(m.MD5OfBody)
		if md5Body == "" {
			sum := md5.Sum([]byte(body))
			md5Body = hex.EncodeToString(sum[:])
		}
		r := events.SQSMessage{
			MessageId:      aws.ToString(m.MessageId),
			ReceiptHandle:  aws.ToString(m.ReceiptHandle),
			Body:           body,
			Md5OfBody:      md5Body,
			Attributes:     map[string]string{},
			EventSource:    "aws:sqs",
			EventSourceARN: arn,
			AWSRegion:      region,
		}
		if m.MD5OfMessageAttributes != nil {
			r.Md5OfMessageAttributes = *m.MD5OfMessageAttributes
		}
		for k, v := range m.Attributes {
			r.Attributes[k] = v
		}
		r.MessageAttributes = map[string]events.SQSMessageAttribute{}
		{
			for k, v := range m.MessageAttributes {
				r.MessageAttributes[k] = events.SQSMessageAttribute{
					StringValue:      v.StringValue,
					BinaryValue:      v.BinaryValue,
					StringListValues: append([]string{}, v.StringListValues...),
					BinaryListValues: append([][]byte{}, v.BinaryListValues...),
					DataType:         aws.ToString(v.DataType),
				}
			}
		}
		ev.Records = append(ev.Records, r)
	}
	return ev
}

// AttributesAPI is the SQS call LookupQueueARN makes.
type AttributesAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ AttributesAPI = (*sqs.Client)(nil)

// LookupQueueARN asks the SQS server for the ARN of the queue at url: the
// eventSourceARN of a mapping's records, and the deadLetterTargetArn of a
// redrive policy. Servers shape URLs and ARNs their own way (SQS,
// LocalStack, moto_server, ElasticMQ, whose region is its own setting), so
// the server's answer is the one to use; QueueARN only derives one.
func LookupQueueARN(ctx context.Context, api AttributesAPI, url string) (string, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("ARN of queue %s: %w", url, err)
	}
	arn := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("ARN of queue %s: the server returned no QueueArn attribute", url)
	}
	return arn, nil
}

// QueueARN derives a queue's ARN from its URL
// (http://host/<account>/<name>).
func QueueARN(url, region string) string {
	parts := strings.Split(strings.TrimRight(url, "/"), "/")
	if len(parts) < 2 {
		return ""
	}
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, parts[len(parts)-2], parts[len(parts)-1])
}

// ReceiveAll receives with in until empties receives have come back empty,
// passing every message to f: how a harness reads a whole queue (a dead
// letter queue at the end of a run).
func ReceiveAll(ctx context.Context, api SQSAPI, in *sqs.ReceiveMessageInput, empties int, f func(types.Message)) error {
	for empty := 0; empty < empties; {
		out, err := api.ReceiveMessage(ctx, in)
		if err != nil {
			return err
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			f(m)
		}
	}
	return nil
}
