package sqsqueue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestDeadLetterRefusedReleases: when the dead-letter queue refuses the
// poison (here a deleted queue; KMS denied and an oversized batch fail the
// same call), the queue gives the messages back with the retry backoff
// instead of holding them and renewing their visibility forever: nothing
// stays held, the failure is counted for an alarm, and the queue's redrive
// policy moves the messages to its own dead-letter queue after
// maxReceiveCount receives: none is lost.
func TestDeadLetterRefusedReleases(t *testing.T) {
	const maxReceive = 2
	c, url, redriveDLQ := testenv.SQSQueues(t, maxReceive, map[string]string{"VisibilityTimeout": "30"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gone, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("gone-" + time.Now().Format("150405.000000000")[7:])})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: gone.QueueUrl}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"p1", "p2", "p3"} {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	q := sqsqueue.New(c, sqsqueue.Config{QueueURL: url, DeadLetterURL: aws.ToString(gone.QueueUrl), WaitTime: time.Second,
		Visibility: 3 * time.Second, RetryBackoff: consume.Backoff{Base: time.Second, Max: time.Second}}, nil)
	defer q.Close()
	refused := 0
	for ctx.Err() == nil {
		msgs, err := q.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			if n, _ := inQueue(ctx, c, redriveDLQ); n == 3 {
				break
			}
			continue
		}
		poison := make([]consume.Poison, len(msgs))
		for i, m := range msgs {
			poison[i] = consume.Poison{Message: m, Reason: "malformed"}
		}
		if err := q.DeadLetter(ctx, poison); err == nil {
			t.Fatal("DeadLetter to a deleted queue succeeded; want an error")
		}
		refused += len(msgs)
		if h := q.Held(); h != 0 {
			t.Fatalf("after the DLQ refused %d messages, %d are still held (their visibility renewed forever); want 0", len(msgs), h)
		}
	}
	if refused != 3*maxReceive {
		t.Errorf("the DLQ was asked %d times; want %d (each message once per receive)", refused, 3*maxReceive)
	}
	if got := q.DeadLetterFailures(); got != int64(refused) {
		t.Errorf("DeadLetterFailures() = %d; want %d (every refused message counted)", got, refused)
	}
	if n, err := inQueue(ctx, c, redriveDLQ); err != nil || n != 3 {
		t.Errorf("the redrive policy's DLQ holds %d messages (%v); want the 3 refused ones", n, err)
	}
}

// inQueue returns how many messages url holds, visible or not.
func inQueue(ctx context.Context, c *sqs.Client, url string) (int, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		return 0, err
	}
	var n int
	_, err = fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], &n)
	return n, err
}

// refusingAPI is fakeAPI whose dead-letter queue refuses every send.
type refusingAPI struct{ fakeAPI }

func (f *refusingAPI) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, fmt.Errorf("KMS.AccessDeniedException: not allowed to use the key")
}

// TestHandlerDeadLetterRefusedBacksOff: on the Lambda, poison the DLQ
// refused is returned as a batch item failure with the retry backoff's
// visibility (as a message the destination failed), not at the queue's
// visibility timeout: a DLQ that refuses for minutes does not spend the
// message's receives before it recovers.
func TestHandlerDeadLetterRefusedBacksOff(t *testing.T) {
	api := &refusingAPI{}
	h := handlerAt(1000, memqueue.NewSink(), &api.fakeAPI)
	h.API = api
	ev := loadEvent(t)
	resp, err := h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	poison := ev.Records[1]
	found := false
	for _, f := range resp.BatchItemFailures {
		found = found || f.ItemIdentifier == poison.MessageId
	}
	if !found {
		t.Fatalf("failures %v; want the poison the DLQ refused among them", resp.BatchItemFailures)
	}
	if v := api.visibility[poison.ReceiptHandle]; v < 15 {
		t.Errorf("visibility of the poison the DLQ refused = %d s; want the retry backoff (>= 15 s at the first receive)", v)
	}
}

// TestHandlerDeadLetterRefusedCounted: the Lambda counts the poison the
// DLQ refused in its EMF line (DeadLetterRefused) and its batch log line,
// for an alarm: the poison the redrive policy moves later arrives without
// its reason.
func TestHandlerDeadLetterRefusedCounted(t *testing.T) {
	api := &refusingAPI{}
	h := handlerAt(1000, memqueue.NewSink(), &api.fakeAPI)
	h.API = api
	var emf bytes.Buffer
	h.Metrics = &emf
	if _, err := h.Handle(context.Background(), loadEvent(t)); err != nil {
		t.Fatal(err)
	}
	var line struct{ Poison, DeadLettered, DeadLetterRefused int }
	if err := json.Unmarshal(emf.Bytes(), &line); err != nil {
		t.Fatalf("EMF line %q: %v", emf.Bytes(), err)
	}
	if line.Poison != 1 || line.DeadLettered != 0 || line.DeadLetterRefused != 1 {
		t.Errorf("EMF Poison %d, DeadLettered %d, DeadLetterRefused %d; want 1, 0, 1 (the refusal counted)", line.Poison, line.DeadLettered, line.DeadLetterRefused)
	}
}
