package sqsthroughput_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/bench/sqsthroughput"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestMeasure runs a small measurement on the local SQS server: every
// message goes round once, the rates are filled in, and the queue is gone
// afterwards.
func TestMeasure(t *testing.T) {
	c := testenv.SQSClient(t)
	ctx := context.Background()
	name := fmt.Sprintf("sqsthroughput-%d", time.Now().UnixNano())
	r, err := sqsthroughput.Measure(ctx, c, name, 25)
	if err != nil {
		t.Fatalf("Measure: %v", err)
	}
	if r.Messages != 25 || r.Redelivered != 0 || r.SendPerSecond <= 0 || r.ReceiveDeletePerSec <= 0 {
		t.Errorf("Measure = %+v; want 25 messages, none redelivered, both rates above 0", r)
	}
	left, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.QueueUrls) != 0 {
		t.Errorf("queues left after Measure: %v; want none", left.QueueUrls)
	}
}

// lossy is an SQS server that accepts every message and delivers only
// the first deliver of them, once.
type lossy struct {
	sqsthroughput.API
	deliver, sent, received int
}

func (l *lossy) CreateQueue(context.Context, *sqs.CreateQueueInput, ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error) {
	return &sqs.CreateQueueOutput{QueueUrl: aws.String("http://sqs.local/000000000000/q")}, nil
}

func (l *lossy) DeleteQueue(context.Context, *sqs.DeleteQueueInput, ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error) {
	return &sqs.DeleteQueueOutput{}, nil
}

func (l *lossy) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	l.sent += len(in.Entries)
	return &sqs.SendMessageBatchOutput{}, nil
}

func (l *lossy) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out := &sqs.ReceiveMessageOutput{}
	for ; l.received < l.deliver && len(out.Messages) < int(in.MaxNumberOfMessages); l.received++ {
		out.Messages = append(out.Messages, types.Message{MessageId: aws.String(fmt.Sprint(l.received)), ReceiptHandle: aws.String("rh")})
	}
	return out, nil
}

func (l *lossy) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// TestMeasureFailsOnLoss: a server that loses messages fails the
// measurement instead of reporting a rate.
func TestMeasureFailsOnLoss(t *testing.T) {
	api := &lossy{deliver: 17}
	_, err := sqsthroughput.Measure(context.Background(), api, "q", 20)
	if err == nil || !strings.Contains(err.Error(), "received 17 of 20") {
		t.Errorf("Measure on a lossy server: %v; want an error saying received 17 of 20", err)
	}
	if api.sent != 20 {
		t.Errorf("sent %d; want 20", api.sent)
	}
}
