package consumers_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestSettlePartialBatchContract: the emulated mapping's Settle keeps the
// partial-batch contract of the AWS mapping on a real queue: a response
// naming only ids of the batch deletes the others, and one whose
// itemIdentifier is empty or names no message of the batch fails the whole
// batch (nothing deleted).
func TestSettlePartialBatchContract(t *testing.T) {
	for _, tt := range []struct {
		name        string
		failures    func(ids []string) []string
		wantDeleted int
	}{
		{"none failed", func([]string) []string { return nil }, 3},
		{"one failed", func(ids []string) []string { return ids[:1] }, 2},
		{"empty identifier", func(ids []string) []string { return []string{ids[0], ""} }, 0},
		{"unknown identifier", func([]string) []string { return []string{"not-in-the-batch"} }, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, url, _ := testenv.SQSQueues(t, 0, map[string]string{"VisibilityTimeout": "30"})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, b := range []string{"a", "b", "c"} {
				if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b)}); err != nil {
					t.Fatal(err)
				}
			}
			var msgs []types.Message
			for len(msgs) < 3 && ctx.Err() == nil {
				got, _, ok := consumers.ReceiveEvent(ctx, c, url, "arn:aws:sqs:us-east-1:000000000000:q", 30*time.Second)
				if ok {
					msgs = append(msgs, got...)
				}
			}
			var ids []string
			for _, m := range msgs {
				ids = append(ids, aws.ToString(m.MessageId))
			}
			var resp events.SQSEventResponse
			for _, id := range tt.failures(ids) {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
			}
			consumers.Settle(ctx, c, url, msgs, resp)
			n, err := consumers.InFlight(ctx, c, url)
			if err != nil {
				t.Fatal(err)
			}
			if deleted := 3 - n; deleted != tt.wantDeleted {
				t.Errorf("Settle with failures %q deleted %d of 3; want %d", tt.failures(ids), deleted, tt.wantDeleted)
			}
		})
	}
}
