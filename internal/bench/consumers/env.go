// Package consumers holds the consumer scenarios that `make bench-consumers`
// runs and that the integration tests run smaller: pacing accuracy of
// concurrent consumers, the overhead of pacing, and no-loss runs of the SQS
// Lambda (its real bootstrap under the Runtime Interface Emulator, fed by an
// emulated event source mapping over a real SQS queue) and of the SQS worker
// (its real binary, killed with SIGKILL and restarted) into MariaDB while
// faults are injected.
package consumers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Env is where the real services are.
type Env struct {
	// AWSEndpoint is moto_server or LocalStack (AWS_ENDPOINT_URL).
	AWSEndpoint string
	// SQSEndpoint serves SQS (AWS_ENDPOINT_URL_SQS): ElasticMQ, moto_server
	// or LocalStack; "" is AWSEndpoint.
	SQSEndpoint string
	// MySQLDSN is a DSN of a database with the mysqlsink schema.
	MySQLDSN string
	// RIE is the aws-lambda-rie binary.
	RIE string
	// MariaDBCtl is localstack/stack/mariadb.sh (SLUICE_MARIADB_CTL); ""
	// skips the MariaDB restart fault.
	MariaDBCtl string
	// Root is the module root (for go build).
	Root string
	// WorkDir holds built binaries and logs.
	WorkDir string
	// Log receives progress.
	Log *slog.Logger
}

// NoLoss is the outcome of one no-loss scenario, counted in the table and
// the dead-letter queue.
type NoLoss struct {
	Path       string `json:"path"`
	Sent       int    `json:"sent"`
	Stored     int    `json:"stored"`
	Duplicates int    `json:"duplicates"`
	Missing    int    `json:"missing"`
	Poison     int    `json:"poison"`
	// PoisonWithReason counts dead letters that carry their reason.
	PoisonWithReason int `json:"poison_with_reason"`
	// Faults lists the faults injected.
	Faults  []string `json:"faults"`
	Seconds float64  `json:"seconds"`
}

// Options size a no-loss scenario.
type Options struct {
	// Messages to send (the bench uses 10,000; tests 500).
	Messages int
	// PoisonEvery makes every n-th message malformed (0: none).
	PoisonEvery int
	// Rate is the allowed aggregate rate written to RATE (messages/s).
	Rate float64
	// Timeout bounds the whole scenario.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	o.Messages = defaults.Positive(o.Messages, 500)
	o.Rate = defaults.Positive(o.Rate, 1000)
	o.Timeout = defaults.Positive(o.Timeout, 10*time.Minute)
	return o
}

// sqsEndpoint is the endpoint of SQS.
func (e Env) sqsEndpoint() string {
	if e.SQSEndpoint != "" {
		return e.SQSEndpoint
	}
	return e.AWSEndpoint
}

func (e Env) aws(ctx context.Context) (aws.Config, error) {
	os.Setenv("AWS_ENDPOINT_URL", e.AWSEndpoint)
	os.Setenv("AWS_ENDPOINT_URL_SQS", e.sqsEndpoint())
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		if os.Getenv(k) == "" {
			os.Setenv(k, v)
		}
	}
	return awsconf.Load(ctx)
}

// childEnv is the environment of a child process (bootstrap, worker).
func (e Env) childEnv(extra map[string]string) []string {
	env := os.Environ()
	base := map[string]string{
		"AWS_ENDPOINT_URL": e.AWSEndpoint, "AWS_ENDPOINT_URL_SQS": e.sqsEndpoint(),
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
	}
	for k, v := range base {
		env = append(env, k+"="+v)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// Build compiles pkg (./functions/...) into WorkDir/name with the Lambda
// flags (CGO_ENABLED=0, -tags lambda.norpc).
func (e Env) Build(ctx context.Context, pkg, name string) (string, error) {
	out := filepath.Join(e.WorkDir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", out, pkg)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// Stack is the per-scenario AWS side: a RATE table and a queue with a DLQ
// whose redrive policy moves a message after maxReceive receives.
type Stack struct {
	SQS      *sqs.Client
	DDB      *dynamodb.Client
	Table    string
	Loop     string
	QueueURL string
	// QueueARN is the queue's ARN as the server reports it.
	QueueARN string
	DLQURL   string
}

// NewStack creates the table (with RATE = rate) and the queues, named by
// prefix.
func (e Env) NewStack(ctx context.Context, prefix string, rate float64, maxReceive int) (*Stack, error) {
	cfg, err := e.aws(ctx)
	if err != nil {
		return nil, err
	}
	s := &Stack{SQS: sqs.NewFromConfig(cfg), DDB: dynamodb.NewFromConfig(cfg), Table: prefix + "-table", Loop: prefix}
	if err := ddbstore.CreateTable(ctx, s.DDB, s.Table); err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	now := time.Now()
	if err := ddbstore.New(s.DDB, s.Table).WriteRate(ctx, protocol.Rate{Loop: s.Loop, PerSecond: rate, WrittenAt: now, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		return nil, fmt.Errorf("write RATE: %w", err)
	}
	if s.QueueURL, s.DLQURL, err = CreateQueues(ctx, s.SQS, prefix, maxReceive); err != nil {
		return s, err
	}
	s.QueueARN, err = localaws.LookupQueueARN(ctx, s.SQS, s.QueueURL)
	return s, err
}

// Close deletes the queues (the table stays; moto forgets it on restart).
func (s *Stack) Close() {
	ctx := context.Background()
	s.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &s.QueueURL})
	s.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &s.DLQURL})
}

// waitUntil polls cond every 200 ms until it is true, ctx ends (a time-out),
// or err.
func waitUntil(ctx context.Context, cond func() (bool, error)) error {
	err := poll.Until(ctx, 200*time.Millisecond, cond)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return errors.Join(errors.New("timed out"), err)
	}
	return err
}

type netDialer struct{}

func (netDialer) dial(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, time.Second)
}
