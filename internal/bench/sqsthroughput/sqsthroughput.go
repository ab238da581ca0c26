// Package sqsthroughput measures what an SQS server sustains for one client
// of the Go SDK v2 (the JSON protocol the consumers speak): messages sent
// with SendMessageBatch, then received with ReceiveMessage and deleted with
// DeleteMessageBatch, batches of 10, one call at a time. `make bench-sqs`
// runs it against ElasticMQ and moto_server in one run and reports their
// ratio.
package sqsthroughput

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
)

// API is the part of the SQS client a measurement uses.
type API interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, opts ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, opts ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

var _ API = (*sqs.Client)(nil)

// batch is SQS's largest batch.
const batch = 10

// Result is one server's measurement.
type Result struct {
	Server   string `json:"server"`
	Endpoint string `json:"endpoint"`
	Messages int    `json:"messages"`
	// SendSeconds and ReceiveDeleteSeconds are the wall times of the two
	// phases; the rates are Messages divided by them.
	SendSeconds          float64 `json:"send_seconds"`
	ReceiveDeleteSeconds float64 `json:"receive_delete_seconds"`
	SendPerSecond        float64 `json:"send_msgs_per_s"`
	ReceiveDeletePerSec  float64 `json:"receive_delete_msgs_per_s"`
	// Redelivered counts messages received more than once (0 unless the
	// server let a visibility timeout expire).
	Redelivered int `json:"redelivered"`
}

// Measure sends n messages to a new queue named name, receives and deletes
// them all, deletes the queue, and reports the rates. It fails when a
// message is not sent, not received or not deleted.
func Measure(ctx context.Context, api API, name string, n int) (Result, error) {
	res := Result{Messages: n}
	q, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name),
		Attributes: map[string]string{"VisibilityTimeout": "300"}})
	if err != nil {
		return res, fmt.Errorf("create queue %s: %w", name, err)
	}
	url := aws.ToString(q.QueueUrl)
	defer api.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: &url})

	t0 := time.Now()
	if err := send(ctx, api, url, n); err != nil {
		return res, err
	}
	res.SendSeconds = time.Since(t0).Seconds()
	t0 = time.Now()
	if res.Redelivered, err = receiveDelete(ctx, api, url, n); err != nil {
		return res, err
	}
	res.ReceiveDeleteSeconds = time.Since(t0).Seconds()
	res.SendPerSecond = rate(n, res.SendSeconds)
	res.ReceiveDeletePerSec = rate(n, res.ReceiveDeleteSeconds)
	res.SendSeconds, res.ReceiveDeleteSeconds = e2ekit.Round(res.SendSeconds, 3), e2ekit.Round(res.ReceiveDeleteSeconds, 3)
	return res, nil
}

// rate is n/seconds in whole messages per second.
func rate(n int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return math.Round(float64(n) / seconds)
}

// send sends messages 0..n-1 in batches of 10.
func send(ctx context.Context, api API, url string, n int) error {
	for start := 0; start < n; start += batch {
		var entries []types.SendMessageBatchRequestEntry
		for i := start; i < min(start+batch, n); i++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
				MessageBody: aws.String(fmt.Sprintf(`{"seq":%d,"order":"o-%d"}`, i, i))})
		}
		out, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			return fmt.Errorf("send messages %d to %d: %w", start, start+len(entries)-1, err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return fmt.Errorf("send message %s: %s: %s (%d of the batch failed)", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message), len(out.Failed))
		}
	}
	return nil
}

// emptyPolls is how many empty 1-s long polls in a row end the receive
// phase before every message came back: the server lost some.
const emptyPolls = 5

// receiveDelete receives and deletes until n distinct messages were
// received, and returns how many receives were redeliveries.
func receiveDelete(ctx context.Context, api API, url string, n int) (int, error) {
	seen := make(map[string]bool, n)
	redelivered, empty := 0, 0
	for len(seen) < n {
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: batch, WaitTimeSeconds: 1})
		if err != nil {
			return redelivered, fmt.Errorf("receive (%d of %d so far): %w", len(seen), n, err)
		}
		if len(out.Messages) == 0 {
			if empty++; empty >= emptyPolls {
				return redelivered, fmt.Errorf("received %d of %d messages, then %d empty polls", len(seen), n, empty)
			}
			continue
		}
		empty = 0
		entries := make([]types.DeleteMessageBatchRequestEntry, 0, len(out.Messages))
		for i, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				redelivered++
			}
			seen[id] = true
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		del, err := api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			return redelivered, fmt.Errorf("delete a batch of %d: %w", len(entries), err)
		}
		if len(del.Failed) > 0 {
			f := del.Failed[0]
			return redelivered, fmt.Errorf("delete: %s: %s (%d of the batch failed)", aws.ToString(f.Code), aws.ToString(f.Message), len(del.Failed))
		}
	}
	return redelivered, nil
}
