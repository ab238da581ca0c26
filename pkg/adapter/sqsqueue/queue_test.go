package sqsqueue_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// localSQS returns an SQS client on the local SQS endpoint (ElasticMQ, or
// moto_server under SLUICE_SQS=moto) and a fresh queue with a dead-letter
// queue. maxReceive > 0 gives the queue a redrive policy to the DLQ after
// that many receives, naming the DLQ by the ARN the server reports.
func localSQS(t *testing.T, maxReceive int) (*sqs.Client, string, string) {
	t.Helper()
	ep := testenv.SQSEndpoint(t)
	c, url, dlqURL := testenv.SQSQueues(t, maxReceive, nil)
	t.Logf("SQS endpoint %s: queue %s, DLQ %s", ep, url, dlqURL)
	return c, url, dlqURL
}

func send(t *testing.T, c *sqs.Client, url string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b)}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

func receiveAll(t *testing.T, q *sqsqueue.Queue, want int) []consume.Message {
	t.Helper()
	var got []consume.Message
	for tries := 0; len(got) < want && tries < 20; tries++ {
		ms, err := q.Receive(context.Background(), 10)
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		got = append(got, ms...)
	}
	if len(got) != want {
		t.Fatalf("received %d messages; want %d", len(got), want)
	}
	return got
}

func TestQueueAckReleaseDeadLetter(t *testing.T) {
	c, url, dlqURL := localSQS(t, 0)
	send(t, c, url, `{"n":1}`, `{"n":2}`, `{"n":3}`, `bad`)
	q := sqsqueue.New(c, sqsqueue.Config{QueueURL: url, DeadLetterURL: dlqURL, WaitTime: time.Second}, nil)
	defer q.Close()
	ctx := context.Background()

	got := receiveAll(t, q, 4)
	// Order: {"n":1}, {"n":2}, {"n":3}, bad.
	key := func(m consume.Message) string {
		if string(m.Body) == "bad" {
			return "~" // after every JSON object
		}
		return string(m.Body)
	}
	sort.Slice(got, func(i, j int) bool { return key(got[i]) < key(got[j]) })
	if got[0].ReceiveCount != 1 || got[0].ID == "" || got[0].SentAt.IsZero() {
		t.Errorf("message metadata = %+v; want id, receive count 1, sent time", got[0])
	}
	if q.Held() != 4 {
		t.Errorf("Held() = %d; want 4", q.Held())
	}
	// {"n":1},{"n":2} stored; {"n":3} released; bad dead-lettered.
	if err := q.Ack(ctx, got[0:2]); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := q.Release(ctx, got[2:3]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := q.DeadLetter(ctx, []consume.Poison{{Message: got[3], Reason: "malformed payload"}}); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	if q.Held() != 0 {
		t.Errorf("Held() after settling = %d; want 0", q.Held())
	}
	again := receiveAll(t, q, 1)
	if string(again[0].Body) != `{"n":3}` || again[0].ReceiveCount != 2 {
		t.Errorf("redelivered %s (receive count %d); want {\"n\":3} (2)", again[0].Body, again[0].ReceiveCount)
	}
	q.Ack(ctx, again)

	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlqURL, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("DLQ holds %d messages; want 1", len(out.Messages))
	}
	m := out.Messages[0]
	if aws.ToString(m.Body) != "bad" || aws.ToString(m.MessageAttributes[sqsqueue.ReasonAttribute].StringValue) != "malformed payload" {
		t.Errorf("DLQ message %q reason %q; want \"bad\" with reason", aws.ToString(m.Body), aws.ToString(m.MessageAttributes[sqsqueue.ReasonAttribute].StringValue))
	}
	if n, err := q.Depth(ctx); err != nil || n != 0 {
		t.Errorf("Depth() = %d, %v; want 0", n, err)
	}
}

// TestQueueExtendsVisibility holds a message three times longer than its
// visibility timeout: the extender keeps it hidden, so nobody else gets it.
func TestQueueExtendsVisibility(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 4 s of real time")
	}
	c, url, _ := localSQS(t, 0)
	send(t, c, url, `{"slow":true}`)
	q := sqsqueue.New(c, sqsqueue.Config{QueueURL: url, WaitTime: time.Second, Visibility: 1 * time.Second}, nil)
	defer q.Close()
	held := receiveAll(t, q, 1)
	other := sqsqueue.New(c, sqsqueue.Config{QueueURL: url, WaitTime: time.Second, Visibility: 30 * time.Second}, nil)
	defer other.Close()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ms, err := other.Receive(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 0 {
			t.Fatalf("message visible to another consumer while held and extended")
		}
	}
	q.Release(context.Background(), held)
	if got := receiveAll(t, other, 1); got[0].ID != held[0].ID {
		t.Errorf("after release got %s; want %s", got[0].ID, held[0].ID)
	}
}

func TestDeadLetterWithoutDLQReleases(t *testing.T) {
	c, url, _ := localSQS(t, 0)
	send(t, c, url, `nope`)
	q := sqsqueue.New(c, sqsqueue.Config{QueueURL: url, WaitTime: time.Second}, nil)
	defer q.Close()
	got := receiveAll(t, q, 1)
	if err := q.DeadLetter(context.Background(), []consume.Poison{{Message: got[0], Reason: "x"}}); err != nil {
		t.Fatal(err)
	}
	// Released for the redrive policy: visible again at once.
	if again := receiveAll(t, q, 1); again[0].ID != got[0].ID {
		t.Errorf("got %s; want %s", again[0].ID, got[0].ID)
	}
}

// TestRedrivePolicyMovesToDLQ is the server's half of dead-lettering, which
// the Lambda path relies on: a message released maxReceiveCount times is
// moved by the queue's redrive policy to the DLQ, body intact, and is
// received there once. `make test-sqs-servers` runs it against ElasticMQ
// and moto_server.
func TestRedrivePolicyMovesToDLQ(t *testing.T) {
	c, url, dlqURL := localSQS(t, 2)
	send(t, c, url, `{"poison":true}`)
	q := sqsqueue.New(c, sqsqueue.Config{QueueURL: url, WaitTime: time.Second}, nil)
	defer q.Close()
	ctx := context.Background()
	for receive := 1; receive <= 2; receive++ {
		got := receiveAll(t, q, 1)
		if got[0].ReceiveCount != receive {
			t.Errorf("receive %d: ReceiveCount = %d; want %d", receive, got[0].ReceiveCount, receive)
		}
		if err := q.Release(ctx, got); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	// The third receive finds the message gone: the redrive policy moved it.
	if ms, err := q.Receive(ctx, 10); err != nil || len(ms) != 0 {
		t.Fatalf("Receive after %d receives = %d messages, %v; want 0 (moved to the DLQ)", 2, len(ms), err)
	}
	var moved []string
	for tries := 0; len(moved) < 1 && tries < 5; tries++ {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlqURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("receive from DLQ: %v", err)
		}
		for _, m := range out.Messages {
			moved = append(moved, aws.ToString(m.Body))
		}
	}
	if len(moved) != 1 || moved[0] != `{"poison":true}` {
		t.Errorf("DLQ holds %q; want the one poison message", moved)
	}
}
