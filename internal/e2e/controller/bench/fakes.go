package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

// fakeDynamo is an in-process stand-in for the DynamoDB operations the store
// calls, with DynamoDB's limits (100 keys per BatchGetItem, 1 MB query
// pages, conditional transactions), recording every call. It counts calls
// for 1,000 loops, where moto_server takes minutes per tick (it copies its
// tables for every transaction).
type fakeDynamo struct {
	mu    sync.Mutex
	items map[[2]string]map[string]types.AttributeValue
	calls *harness.Counter
}

var (
	_ ddbstore.API = (*fakeDynamo)(nil)
	_ cwmetric.API = (*fakeCloudWatch)(nil)
)

func newFakeDynamo() *fakeDynamo {
	return &fakeDynamo{items: map[[2]string]map[string]types.AttributeValue{}, calls: harness.NewCounter()}
}

func keyOf(item map[string]types.AttributeValue) [2]string {
	pk, _ := item["pk"].(*types.AttributeValueMemberS)
	sk, _ := item["sk"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return [2]string{}
	}
	return [2]string{pk.Value, sk.Value}
}

func (f *fakeDynamo) count(op string) { f.calls.Add(op) }

func (f *fakeDynamo) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("DynamoDB.GetItem")
	return &dynamodb.GetItemOutput{Item: f.items[keyOf(in.Key)]}, nil
}

func (f *fakeDynamo) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("DynamoDB.PutItem")
	f.items[keyOf(in.Item)] = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

func (f *fakeDynamo) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errors.New("fakeDynamo: UpdateItem not supported")
}

func (f *fakeDynamo) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, errors.New("fakeDynamo: Scan not supported")
}

// size approximates an item's size the way DynamoDB counts it (names plus
// values).
func size(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k)
		switch x := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(x.Value)
		case *types.AttributeValueMemberN:
			n += len(x.Value)
		case *types.AttributeValueMemberM:
			n += size(x.Value)
		default:
			n++
		}
	}
	return n
}

func (f *fakeDynamo) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("DynamoDB.Query")
	if in.IndexName == nil {
		return f.queryPartition(in)
	}
	if aws.ToString(in.IndexName) != ddbstore.IndexBySort {
		return nil, fmt.Errorf("fakeDynamo: query on index %q not supported", aws.ToString(in.IndexName))
	}
	sk := in.ExpressionAttributeValues[":sk"].(*types.AttributeValueMemberS).Value
	var keys [][2]string
	for k := range f.items {
		if k[1] == sk {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if a[0] < b[0] {
			return -1
		}
		if a[0] > b[0] {
			return 1
		}
		return 0
	})
	start := 0
	if in.ExclusiveStartKey != nil {
		after := keyOf(in.ExclusiveStartKey)
		for start < len(keys) && keys[start][0] <= after[0] {
			start++
		}
	}
	out := &dynamodb.QueryOutput{}
	bytes := 0
	for _, k := range keys[start:] {
		item := f.items[k]
		out.Items = append(out.Items, item)
		bytes += size(item)
		if bytes >= 1<<20 {
			out.LastEvaluatedKey = map[string]types.AttributeValue{"pk": item["pk"], "sk": item["sk"]}
			break
		}
	}
	return out, nil
}

// queryPartition answers a query on the table of one partition (:pk) by a
// sort key prefix (:prefix, the loop's leases), in one page; the caller
// holds mu.
func (f *fakeDynamo) queryPartition(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	pk, ok1 := in.ExpressionAttributeValues[":pk"].(*types.AttributeValueMemberS)
	prefix, ok2 := in.ExpressionAttributeValues[":prefix"].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("fakeDynamo: query %q not supported", aws.ToString(in.KeyConditionExpression))
	}
	out := &dynamodb.QueryOutput{}
	for k, item := range f.items {
		if k[0] == pk.Value && strings.HasPrefix(k[1], prefix.Value) {
			out.Items = append(out.Items, item)
		}
	}
	out.Count = int32(len(out.Items))
	return out, nil
}

func (f *fakeDynamo) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("DynamoDB.BatchGetItem")
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		if len(ka.Keys) > 100 {
			return nil, fmt.Errorf("fakeDynamo: BatchGetItem with %d keys; DynamoDB allows 100", len(ka.Keys))
		}
		for _, k := range ka.Keys {
			if item, ok := f.items[keyOf(k)]; ok {
				out.Responses[table] = append(out.Responses[table], item)
			}
		}
	}
	return out, nil
}

func (f *fakeDynamo) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("DynamoDB.TransactWriteItems")
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	failed := false
	for i, ti := range in.TransactItems {
		reasons[i].Code = aws.String("None")
		if ti.Put == nil || ti.Put.ConditionExpression == nil {
			continue
		}
		cur, exists := f.items[keyOf(ti.Put.Item)]
		ok := true
		switch cond := aws.ToString(ti.Put.ConditionExpression); cond {
		case "attribute_not_exists(pk)":
			ok = !exists
		case "version = :v":
			want := ti.Put.ExpressionAttributeValues[":v"].(*types.AttributeValueMemberN).Value
			got, _ := cur["version"].(*types.AttributeValueMemberN)
			ok = exists && got != nil && got.Value == want
		default:
			return nil, fmt.Errorf("fakeDynamo: condition %q not supported", cond)
		}
		if !ok {
			failed = true
			reasons[i].Code = aws.String("ConditionalCheckFailed")
		}
	}
	if failed {
		return nil, &types.TransactionCanceledException{Message: aws.String("condition failed"), CancellationReasons: reasons}
	}
	for _, ti := range in.TransactItems {
		if ti.Put != nil {
			f.items[keyOf(ti.Put.Item)] = ti.Put.Item
		}
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// fakeCloudWatch answers GetMetricData with one datapoint per query and
// counts its calls; it refuses more than 500 queries a call, as CloudWatch
// does.
type fakeCloudWatch struct {
	mu    sync.Mutex
	calls int
}

func (f *fakeCloudWatch) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if len(in.MetricDataQueries) > 500 {
		return nil, fmt.Errorf("fakeCloudWatch: %d queries; CloudWatch allows 500", len(in.MetricDataQueries))
	}
	out := &cloudwatch.GetMetricDataOutput{}
	for _, q := range in.MetricDataQueries {
		out.MetricDataResults = append(out.MetricDataResults, cwtypes.MetricDataResult{
			Id: q.Id, Timestamps: []time.Time{in.EndTime.Add(-150 * time.Second)}, Values: []float64{55},
		})
	}
	return out, nil
}

func (f *fakeCloudWatch) takeCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = 0
	return c
}
