// Package awsconf loads the AWS SDK configuration the way every Sluice
// binary does: the standard chain (environment, shared files, IAM role), with
// the SDK's endpoint variables honoured for local servers: AWS_ENDPOINT_URL
// for every service (moto_server or LocalStack on 127.0.0.1:4566) and a
// service-specific one, such as AWS_ENDPOINT_URL_SQS (ElasticMQ on
// 127.0.0.1:9324), before it. Load sets no endpoint of its own, so that those
// variables decide.
package awsconf

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Load returns the AWS configuration from the standard chain. The region
// defaults to us-east-1 when none is configured.
func Load(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

// Endpoint returns the overriding endpoint (AWS_ENDPOINT_URL), or "" when the
// real AWS endpoints are used. Clients whose default protocol a local
// emulator does not speak (CloudWatch's CBOR) check it.
func Endpoint() string { return os.Getenv("AWS_ENDPOINT_URL") }
