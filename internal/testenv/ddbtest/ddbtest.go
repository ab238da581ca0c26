// Package ddbtest gives an integration test a fresh Sluice table on the
// local DynamoDB endpoint (moto_server under `make test`).
package ddbtest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

var seq atomic.Int64

// Table creates a table as ddbstore.CreateTable does, named
// prefix-<nanoseconds>-<n>, on the endpoint testenv.AWSEndpoint checks (the
// test is skipped, or fails under SLUICE_INTEGRATION=1, without one), and
// deletes it when the test ends.
func Table(t testing.TB, prefix string) (*dynamodb.Client, string) {
	t.Helper()
	testenv.AWSEndpoint(t)
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	table := strings.ToLower(fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), seq.Add(1)))
	if err := ddbstore.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
	return client, table
}
