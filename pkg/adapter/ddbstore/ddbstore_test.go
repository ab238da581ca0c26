package ddbstore_test

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
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

var tableSeq atomic.Int64

// newStore returns a store on a fresh table in the local AWS endpoint.
func newStore(t *testing.T) *ddbstore.Store {
	t.Helper()
	testenv.AWSEndpoint(t)
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	name := strings.ToLower(fmt.Sprintf("sluice-test-%d-%d", time.Now().UnixNano(), tableSeq.Add(1)))
	if err := ddbstore.CreateTable(ctx, client, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return ddbstore.New(client, name)
}

func TestRateContract(t *testing.T) {
	storetest.TestRate(t, func(t *testing.T) storetest.RateStore { return newStore(t) })
}

func TestTickStoreContract(t *testing.T) {
	storetest.TestTickStore(t, func(t *testing.T) storetest.Store { return newStore(t) })
}
