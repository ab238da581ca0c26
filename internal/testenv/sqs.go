package testenv

import (
	"context"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
)

// SQSClient returns an SQS client of the local SQS server (SQSEndpoint),
// with the local stack's credentials and region where the environment sets
// none.
func SQSClient(t testing.TB) *sqs.Client {
	t.Helper()
	SQSEndpoint(t)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		if os.Getenv(k) == "" {
			t.Setenv(k, v)
		}
	}
	cfg, err := awsconf.Load(context.Background())
	if err != nil {
		t.Fatalf("AWS configuration of the local SQS server: %v", err)
	}
	return sqs.NewFromConfig(cfg)
}

// SQSQueues creates on the local SQS server a fresh queue and its
// dead-letter queue, both deleted when the test ends, and returns the
// client and both URLs. maxReceive > 0 gives the queue a redrive policy to
// the DLQ after that many receives, naming the DLQ by the ARN the server
// reports; attrs are further attributes of the queue (VisibilityTimeout).
func SQSQueues(t testing.TB, maxReceive int, attrs map[string]string) (*sqs.Client, string, string) {
	t.Helper()
	c := SQSClient(t)
	ctx := context.Background()
	name := fmt.Sprintf("t%d", time.Now().UnixNano())
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatalf("create DLQ: %v", err)
	}
	t.Cleanup(func() { c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: dlq.QueueUrl}) })
	qa := maps.Clone(attrs)
	if maxReceive > 0 {
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatalf("DLQ ARN: %v", err)
		}
		if qa == nil {
			qa = map[string]string{}
		}
		qa["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, a.Attributes["QueueArn"], maxReceive)
	}
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: qa})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	t.Cleanup(func() { c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	return c, *q.QueueUrl, *dlq.QueueUrl
}
