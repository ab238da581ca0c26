// Package ddbtest gives integration tests a fresh loop table (the schema of
// ddbstore.CreateTable) on the DynamoDB endpoint of the AWS configuration
// (AWS_ENDPOINT_URL: moto_server or LocalStack), deleted when the test ends.
package ddbtest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

var seq atomic.Int64

// Table creates a table named prefix-<unique> with the loop table's schema,
// deletes it when the test ends, and returns the client and the name.
func Table(t testing.TB, prefix string) (*dynamodb.Client, string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	name := strings.ToLower(fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), seq.Add(1)))
	if err := ddbstore.CreateTable(ctx, client, name); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	return client, name
}
