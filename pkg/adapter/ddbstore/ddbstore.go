// Package ddbstore is the consumers' side of the loop table in DynamoDB: the
// table client, the allowed rate (RATE) and the consumers' leases (PEER),
// the items of pkg/protocol. The partition key `pk` is the loop id, the sort
// key `sk` names the item. The controller's items (PARAMS, STATE,
// PARAMS_STATUS) are in pkg/adapter/ddbloop, so that a consumer links no
// control law. docs/controller.md documents every attribute.
package ddbstore

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
)

// DefaultTable is the table name used when SLUICE_TABLE is not set.
const DefaultTable = "sluice"

// SortRate is the sort key of a loop's RATE item.
const SortRate = ddbitem.SortRate

// IndexBySort is the global secondary index (partition key sk, sort key pk)
// through which the controller lists every loop's PARAMS item and every
// consumer's lease in one query each, without scanning the other items of
// the table (RATE, history).
const IndexBySort = ddbitem.IndexBySort

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

// Store reads and writes the consumers' items of every loop in one table.
// A consumer uses one Store as its RateReader and its PeerStore: the RATE
// it read last for a loop picks the layout of the loop's leases
// (protocol.Rate.LeaseLayout).
type Store struct {
	api    API
	table  string
	log    *slog.Logger
	leases leaseMemory
}

// New returns a store on table through api.
func New(api API, table string) *Store {
	if table == "" {
		table = DefaultTable
	}
	return &Store{api: api, table: table}
}

// WithLog sets where the store logs what it skips (a lease item that does
// not decode) and returns s; without it, slog.Default().
func (s *Store) WithLog(log *slog.Logger) *Store {
	s.log = log
	return s
}

func (s *Store) logger() *slog.Logger {
	if s.log == nil {
		return slog.Default()
	}
	return s.log
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
