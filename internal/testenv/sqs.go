package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

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
