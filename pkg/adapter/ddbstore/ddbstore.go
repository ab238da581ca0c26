// Package ddbstore keeps a loop's items in one DynamoDB table: the operator's
// parameters (PARAMS), the controller's state (STATE) and the allowed rate
// that consumers read (RATE). The partition key `pk` is the loop id, the sort
// key `sk` names the item. docs/controller.md documents every attribute.
package ddbstore

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DefaultTable is the table name used when SLUICE_TABLE is not set.
const DefaultTable = "sluice"

// Sort keys of the items of one loop.
const (
	SortParams       = "PARAMS"
	SortParamsStatus = "PARAMS_STATUS"
	SortState        = "STATE"
	SortRate         = "RATE"
)

// API is the part of the DynamoDB client the store uses; *dynamodb.Client
// satisfies it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Store reads and writes the items of every loop in one table.
type Store struct {
	api   API
	table string
}

// New returns a store on table through api.
func New(api API, table string) *Store {
	if table == "" {
		table = DefaultTable
	}
	return &Store{api: api, table: table}
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// TableFromEnv returns the table name from SLUICE_TABLE, or DefaultTable.
func TableFromEnv() string {
	if t := os.Getenv("SLUICE_TABLE"); t != "" {
		return t
	}
	return DefaultTable
}

func wrap(op, loopID string, err error) error {
	return fmt.Errorf("dynamodb %s loop %q: %w", op, loopID, err)
}
