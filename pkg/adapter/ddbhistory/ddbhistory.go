// Package ddbhistory stores the dashboard's history: one item per loop per
// controller tick, in the same DynamoDB table as the loop's PARAMS, STATE and
// RATE items, with a TTL so that DynamoDB deletes it after a few days.
//
// Item layout (pk = loop id, sk = "HIST#" + zero-padded unix milliseconds, so
// that a Query on the sort key returns the ticks in time order):
//
//	pk        S     loop id
//	sk        S     HIST#000001796000000000
//	t         N     tick time, unix milliseconds
//	setpoint  N     CPU setpoint, percent
//	measured  N|NULL measured CPU, percent; NULL when stale or missing
//	rate      N     allowed rate, messages/s
//	consumed  N|NULL consumed rate, messages/s
//	consumed_smoothing_s N  the time constant of the average consumed is, seconds (absent: the raw rate)
//	p, i, ff  N     controller terms, messages/s
//	saturated BOOL  output at a bound or slew limit
//	limited   BOOL  the loop was limited by demand (rate held near what was taken)
//	stale     BOOL  metric stale or missing
//	depth     N|NULL queue depth or lag, messages
//	mode      S     auto, manual or shadow
//	limiting  S     the signal whose controller set the rate (override control; absent for one signal)
//	signals   S     every signal's setpoint and measurement, as JSON (absent for one signal)
//	reason    S     what set the rate (loop.ReasonCode; absent before reasons were kept)
//	reason_text S   the reason as a sentence
//	inner_latency_ms, inner_reference_ms N  the consumers' inner loop: mean store latency per message and its learned reference, ms (absent: none runs)
//	withheld  N     messages/s the inner loops' cut held back below the shares (absent: none)
//	ttl       N     expiry, unix seconds (the table's TTL attribute)
//
// Store is the DynamoDB adapter; Memory is the in-memory one. Both implement
// the history reads the dashboard needs (Last, Since, and Loops for Store)
// and the Append method the controller calls.
package ddbhistory

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// SortKeyPrefix is the prefix of history items' sort keys.
const SortKeyPrefix = "HIST#"

// DefaultRetention is how long a history item lives before its TTL expires.
const DefaultRetention = 72 * time.Hour

// Client is the part of the DynamoDB API that Store uses; *dynamodb.Client
// implements it.
type Client interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// Store reads and writes history items in a DynamoDB table.
type Store struct {
	client    Client
	table     string
	index     string
	retention time.Duration
}

// Option configures a Store.
type Option func(*Store)

// WithRetention sets how long items live (their ttl attribute); the default
// is DefaultRetention.
func WithRetention(d time.Duration) Option { return func(s *Store) { s.retention = d } }

// WithIndex names the global secondary index whose partition key is sk
// (default "by-sk", the index of pkg/adapter/ddbstore's table), which Loops
// queries.
func WithIndex(name string) Option { return func(s *Store) { s.index = name } }

// DefaultIndex is the by-sk index that the loop's table has.
const DefaultIndex = "by-sk"

// New returns a Store on the given table.
func New(client Client, table string, opts ...Option) *Store {
	s := &Store{client: client, table: table, index: DefaultIndex, retention: DefaultRetention}
	for _, o := range opts {
		o(s)
	}
	return s
}

// SortKey returns the sort key of the history item at t.
func SortKey(t time.Time) string {
	return fmt.Sprintf("%s%018d", SortKeyPrefix, t.UnixMilli())
}

// Item returns the DynamoDB item of p for the loop.
func (s *Store) Item(loopID string, p history.Point) map[string]types.AttributeValue {
	ms := p.T.UnixMilli()
	var signals string
	if len(p.Signals) > 0 {
		// Every signal's setpoint and measurement, as JSON (null: none).
		if b, err := json.Marshal(p.Signals); err == nil {
			signals = string(b)
		}
	}
	it, err := attributevalue.MarshalMap(item{
		PK: loopID, SK: SortKey(p.T), T: &ms, Setpoint: nullable(p.Setpoint), Measured: nullable(p.Measured),
		Rate: nullable(p.Rate), Consumed: nullable(p.Consumed), P: nullable(p.P), I: nullable(p.I), FF: nullable(p.FF),
		Smoothing: p.ConsumedSmoothing.Seconds(), Saturated: p.Saturated, Limited: p.Limited, Stale: p.Stale, ModelDrift: p.ModelDrift,
		Depth: nullable(p.Depth), Mode: p.Mode, Limiting: p.Limiting, Signals: signals, TTL: p.T.Add(s.retention).Unix(),
		Reason: p.Reason, ReasonText: p.ReasonText,
		InnerLatency: float64(p.InnerLatency) / float64(time.Millisecond), InnerReference: float64(p.InnerReference) / float64(time.Millisecond),
		Withheld: p.Withheld,
	})
	if err != nil {
		panic(fmt.Sprintf("ddbhistory: marshal item: %v", err)) // item's fields all marshal
	}
	return it
}

// Append writes the history item of one tick. Writing the same tick twice
// overwrites it, so a retried controller invocation does not duplicate it.
func (s *Store) Append(ctx context.Context, loopID string, p history.Point) error {
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: s.Item(loopID, p)})
	if err != nil {
		return fmt.Errorf("write history of loop %s at %s: %w", loopID, p.T.Format(time.RFC3339), err)
	}
	return nil
}

// Last returns the newest n points of the loop, oldest first.
func (s *Store) Last(ctx context.Context, loopID string, n int) ([]history.Point, error) {
	ps, err := s.query(ctx, loopID, SortKeyPrefix, false, n)
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(ps)-1; i < j; i, j = i+1, j-1 {
		ps[i], ps[j] = ps[j], ps[i]
	}
	return ps, nil
}

// Since returns at most n points after t (exclusive), oldest first.
func (s *Store) Since(ctx context.Context, loopID string, t time.Time, n int) ([]history.Point, error) {
	return s.query(ctx, loopID, SortKey(t), true, n)
}

// query reads history items whose sort key is above from (or all of them when
// from is the bare prefix), in the given order, at most n (n <= 0: all).
func (s *Store) query(ctx context.Context, loopID, from string, forward bool, n int) ([]history.Point, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: loopID},
			":lo": &types.AttributeValueMemberS{Value: from},
			":hi": &types.AttributeValueMemberS{Value: SortKeyPrefix + "~"},
		},
		ScanIndexForward: aws.Bool(forward),
	}
	var opts []func(*dynamodb.QueryPaginatorOptions)
	if n > 0 {
		opts = append(opts, func(o *dynamodb.QueryPaginatorOptions) { o.Limit = int32(min(n+1, 1000)) })
	}
	var out []history.Point
	for pages := dynamodb.NewQueryPaginator(s.client, in, opts...); pages.HasMorePages(); {
		res, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read history of loop %s: %w", loopID, err)
		}
		for _, it := range res.Items {
			if sk, _ := it["sk"].(*types.AttributeValueMemberS); sk != nil && sk.Value == from {
				continue // Since is exclusive of t
			}
			p, err := decode(it)
			if err != nil {
				return nil, fmt.Errorf("read history of loop %s: %w", loopID, err)
			}
			out = append(out, p)
			if n > 0 && len(out) == n {
				return out, nil
			}
		}
	}
	return out, nil
}

// decode turns a history item back into a point. An item written before t
// was stored has its time in the sort key.
func decode(av map[string]types.AttributeValue) (history.Point, error) {
	nan := nullable(math.NaN())
	it := item{Setpoint: nan, Measured: nan, Rate: nan, Consumed: nan, P: nan, I: nan, FF: nan, Depth: nan}
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return history.Point{}, err
	}
	if it.T == nil {
		if it.SK == "" {
			return history.Point{}, fmt.Errorf("history item without t or sk")
		}
		ms, err := strconv.ParseInt(strings.TrimPrefix(it.SK, SortKeyPrefix), 10, 64)
		if err != nil {
			return history.Point{}, fmt.Errorf("history item sk %q: %w", it.SK, err)
		}
		it.T = &ms
	}
	p := history.Point{
		T: time.UnixMilli(*it.T).UTC(), Setpoint: float64(it.Setpoint), Measured: float64(it.Measured),
		Rate: float64(it.Rate), Consumed: float64(it.Consumed), P: float64(it.P), I: float64(it.I), FF: float64(it.FF),
		ConsumedSmoothing: time.Duration(it.Smoothing * float64(time.Second)), Saturated: it.Saturated, Limited: it.Limited, Stale: it.Stale, ModelDrift: it.ModelDrift,
		Depth: float64(it.Depth), Mode: it.Mode, Limiting: it.Limiting, Reason: it.Reason, ReasonText: it.ReasonText,
		InnerLatency:   time.Duration(it.InnerLatency * float64(time.Millisecond)),
		InnerReference: time.Duration(it.InnerReference * float64(time.Millisecond)), Withheld: it.Withheld,
	}
	if it.Signals != "" {
		if err := json.Unmarshal([]byte(it.Signals), &p.Signals); err != nil {
			return p, fmt.Errorf("history item signals: %w", err)
		}
	}
	return p, nil
}

// Loops lists the loops of the table: the partition keys of its PARAMS
// items, read with a Query on the table's by-sk index (partition key sk),
// which does not read the history items.
func (s *Store) Loops(ctx context.Context) ([]string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(s.index),
		KeyConditionExpression:    aws.String("sk = :params"),
		ProjectionExpression:      aws.String("pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":params": &types.AttributeValueMemberS{Value: "PARAMS"}},
	}
	var ids []string
	for pages := dynamodb.NewQueryPaginator(s.client, in); pages.HasMorePages(); {
		res, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list loops in table %s (index %s): %w", s.table, s.index, err)
		}
		for _, it := range res.Items {
			if pk, _ := it["pk"].(*types.AttributeValueMemberS); pk != nil {
				ids = append(ids, pk.Value)
			}
		}
	}
	return ids, nil
}

// maxBatchWrite is BatchWriteItem's limit on items in one request.
const maxBatchWrite = 25

// AppendReports writes the history items of one controller tick at t, one
// per loop whose tick was applied, 25 items per BatchWriteItem call. It is
// the one call the controller makes after loop.Ticker.Tick.
func (s *Store) AppendReports(ctx context.Context, t time.Time, reports []loop.Report) error {
	var reqs []types.WriteRequest
	for _, r := range reports {
		if p, ok := history.FromReport(t, r); ok {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: s.Item(r.Loop, p)}})
		}
	}
	for start := 0; start < len(reqs); start += maxBatchWrite {
		batch := reqs[start:min(start+maxBatchWrite, len(reqs))]
		for attempt := 0; len(batch) > 0; attempt++ {
			if attempt == 5 {
				return fmt.Errorf("write history at %s: %d items still unprocessed after %d attempts", t.Format(time.RFC3339), len(batch), attempt)
			}
			out, err := s.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
				RequestItems: map[string][]types.WriteRequest{s.table: batch},
			})
			if err != nil {
				return fmt.Errorf("write history at %s: %w", t.Format(time.RFC3339), err)
			}
			batch = out.UnprocessedItems[s.table]
			if len(batch) > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
				}
			}
		}
	}
	return nil
}
