package localaws

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// redriveQueues creates on the local SQS server a queue whose redrive
// policy moves a message to a new dead-letter queue after maxReceive
// receives, with a visibility timeout of one second; it returns the client
// and both URLs.
func redriveQueues(t *testing.T, maxReceive int) (*sqs.Client, string, string) {
	t.Helper()
	return testenv.SQSQueues(t, maxReceive, map[string]string{"VisibilityTimeout": "1"})
}

// TestPollerRedriveCount: on the local SQS server, a message the function
// reports failed in every batch is received exactly maxReceiveCount times
// and then moved to the dead-letter queue by the server's redrive policy,
// as SQS does behind a Lambda mapping; a healthy message of the same batch
// is deleted after its first receive. The function sees each receive's
// ApproximateReceiveCount, 1 to maxReceiveCount, as a consumer needs it to
// know a message's last attempt.
func TestPollerRedriveCount(t *testing.T) {
	const maxReceive = 3
	c, url, dlqURL := redriveQueues(t, maxReceive)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range []string{"fail poison", `{"ok":1}`} {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	rie := &fakeRIE{respond: failBodies}
	srv := httptest.NewServer(rie)
	defer srv.Close()
	p := &Poller{API: c, Invoker: &RIE{URL: srv.URL}, QueueURL: url, Wait: time.Second}
	receives := map[string]int{}
	for empty := 0; empty < 3 && ctx.Err() == nil; {
		res, err := p.PollOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Received == 0 {
			empty++
			continue
		}
		empty = 0
		for _, id := range res.IDs {
			receives[id]++
		}
	}
	var dead []types.Message
	if err := ReceiveAll(ctx, c, &sqs.ReceiveMessageInput{QueueUrl: &dlqURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1}, 2,
		func(m types.Message) { dead = append(dead, m) }); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || !strings.HasPrefix(aws.ToString(dead[0].Body), "fail") {
		t.Fatalf("DLQ holds %d messages (%v); want the one failing message", len(dead), dead)
	}
	if n := receives[aws.ToString(dead[0].MessageId)]; n != maxReceive {
		t.Errorf("failing message received %d times before the DLQ; want maxReceiveCount %d", n, maxReceive)
	}
	if got, want := receiveCounts(t, rie, aws.ToString(dead[0].MessageId)), []string{"1", "2", "3"}; !slices.Equal(got, want) {
		t.Errorf("ApproximateReceiveCount the function saw for the failing message = %v; want %v", got, want)
	}
	if len(receives) != 2 {
		t.Errorf("distinct messages received %d; want 2", len(receives))
	}
	for id, n := range receives {
		if id != aws.ToString(dead[0].MessageId) && n != 1 {
			t.Errorf("healthy message %s received %d times; want 1 (deleted after the batch)", id, n)
		}
	}
}

// receiveCounts returns the ApproximateReceiveCount of message id in each
// event the function received, in order.
func receiveCounts(t *testing.T, rie *fakeRIE, id string) []string {
	t.Helper()
	rie.mu.Lock()
	defer rie.mu.Unlock()
	var counts []string
	for _, p := range rie.payloads {
		var ev events.SQSEvent
		if err := json.Unmarshal(p, &ev); err != nil {
			t.Fatal(err)
		}
		for _, r := range ev.Records {
			if r.MessageId == id {
				counts = append(counts, r.Attributes["ApproximateReceiveCount"])
			}
		}
	}
	return counts
}
