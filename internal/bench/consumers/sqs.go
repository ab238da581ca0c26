package consumers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
)

// DefaultQueueRetention is the MessageRetentionPeriod of the queues
// CreateQueues makes: SQS's default, set explicitly so that it holds on
// any server.
const DefaultQueueRetention = 96 * time.Hour

// CreateQueues creates name-dlq and name with a redrive policy to it after
// maxReceive receives; it returns both URLs.
func CreateQueues(ctx context.Context, c *sqs.Client, name string, maxReceive int) (string, string, error) {
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		return "", "", fmt.Errorf("create %s-dlq: %w", name, err)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", "", fmt.Errorf("DLQ arn: %w", err)
	}
	policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": attrs.Attributes["QueueArn"], "maxReceiveCount": strconv.Itoa(maxReceive)})
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{"RedrivePolicy": string(policy),
		"MessageRetentionPeriod": strconv.Itoa(int(DefaultQueueRetention / time.Second))}})
	if err != nil {
		return "", "", fmt.Errorf("create %s: %w", name, err)
	}
	return *q.QueueUrl, *dlq.QueueUrl, nil
}

// Body returns the payload of message seq: a JSON object, or a malformed
// one for poison.
func Body(seq int, poison bool) string {
	if poison {
		return fmt.Sprintf("poison seq=%d {not json", seq)
	}
	return fmt.Sprintf(`{"seq":%d,"order":"o-%d","qty":%d}`, seq, seq, seq%7+1)
}

// Produce sends n messages (every poisonEvery-th malformed) and returns the
// sequence numbers of the poison ones.
func Produce(ctx context.Context, c *sqs.Client, url string, n, poisonEvery int) (map[int]bool, error) {
	poison := map[int]bool{}
	err := SendAll(ctx, c, url, n, func(i int) types.SendMessageBatchRequestEntry {
		p := poisonEvery > 0 && i%poisonEvery == poisonEvery-1
		if p {
			poison[i] = true
		}
		return types.SendMessageBatchRequestEntry{MessageBody: aws.String(Body(i, p))}
	})
	return poison, err
}

// SendAll sends messages 0 to n-1, ten to a batch, message i as entry(i)
// with the Id i.
func SendAll(ctx context.Context, c *sqs.Client, url string, n int, entry func(i int) types.SendMessageBatchRequestEntry) error {
	for start := 0; start < n; start += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i := start; i < min(start+10, n); i++ {
			e := entry(i)
			e.Id = aws.String(strconv.Itoa(i))
			entries = append(entries, e)
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			return fmt.Errorf("send batch at %d: %w", start, err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("send batch at %d: %d failed", start, len(out.Failed))
		}
	}
	return nil
}

// InFlight returns the visible plus in-flight messages of a queue.
func InFlight(ctx context.Context, c *sqs.Client, url string) (int, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	}})
	if err != nil {
		return 0, fmt.Errorf("queue attributes: %w", err)
	}
	total := 0
	for _, v := range out.Attributes {
		n, _ := strconv.Atoi(v)
		total += n
	}
	return total, nil
}

// seqRE finds the sequence number in a body: "seq=N" in a poison one,
// "seq":N in JSON.
var seqRE = regexp.MustCompile(`"?seq"?[=:](\d+)`)

// Seq returns the sequence number a message body carries.
func Seq(body []byte) (int, bool) {
	m := seqRE.FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n, true
}

// HasReason says whether m carries the reason attribute Sluice sets on a
// dead letter (messages moved by SQS redrive carry none).
func HasReason(m types.Message) bool {
	a, ok := m.MessageAttributes[sqsqueue.ReasonAttribute]
	return ok && aws.ToString(a.StringValue) != ""
}

// DeadLetters drains the DLQ and returns how many copies of each sequence
// number it held, and how many of its messages counted says to count
// (HasReason, for instance).
func DeadLetters(ctx context.Context, c *sqs.Client, url string, counted func(types.Message) bool) (map[int]int, int, error) {
	seqs := map[int]int{}
	n := 0
	err := localaws.ReceiveAll(ctx, c, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}, VisibilityTimeout: 600}, 2,
		func(m types.Message) {
			if seq, ok := Seq([]byte(aws.ToString(m.Body))); ok {
				seqs[seq]++
			}
			if counted(m) {
				n++
			}
		})
	if err != nil {
		return seqs, n, fmt.Errorf("receive DLQ: %w", err)
	}
	return seqs, n, nil
}

// ReceiveEvent receives up to 10 messages from url, invisible for
// visibility, and the SQS event the Lambda service would build from them
// for the queue arn; ok is false when none came.
func ReceiveEvent(ctx context.Context, c *sqs.Client, url, arn string, visibility time.Duration) (msgs []types.Message, ev events.SQSEvent, ok bool) {
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		VisibilityTimeout:           int32(visibility / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil || len(out.Messages) == 0 {
		return nil, ev, false
	}
	for _, msg := range out.Messages {
		ev.Records = append(ev.Records, ToEvent(msg, arn))
	}
	return out.Messages, ev, true
}

// Settle deletes from url the messages the function did not report in its
// batchItemFailures, as the event source mapping does, and returns how
// many it reported. A response naming an item that is empty or not in the
// batch fails the whole batch, as AWS's mapping does (localaws.FailedItems):
// nothing is deleted and Settle returns len(msgs).
func Settle(ctx context.Context, c *sqs.Client, url string, msgs []types.Message, resp events.SQSEventResponse) int {
	ids := make([]string, len(msgs))
	for i, msg := range msgs {
		ids[i] = aws.ToString(msg.MessageId)
	}
	body, _ := json.Marshal(resp)
	failed, err := localaws.FailedItems(body, ids)
	if err != nil {
		return len(msgs)
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, msg := range msgs {
		if !failed[aws.ToString(msg.MessageId)] {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
		}
	}
	if len(del) > 0 {
		c.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: del})
	}
	return len(failed)
}
