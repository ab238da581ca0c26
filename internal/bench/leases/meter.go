// Package leases measures what the consumers' leases cost in DynamoDB
// capacity, computed as DynamoDB bills it (moto's ConsumedCapacity is a
// constant): Meter wraps the table client and charges each call by the
// documented rules. The lease benchmark (leases_test.go, make
// bench-leases) reports the cost per consumer per second of both lease
// layouts.
package leases

import (
	"context"
	"math"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

// Units is capacity consumed: read and write request units.
type Units struct {
	Read, Write float64
}

// Meter is a ddbstore.API that charges every call it passes on, by kind
// (the kind set with Kind when the call started).
type Meter struct {
	ddbstore.API
	// Indexes is the number of global secondary indexes every item is
	// projected into (the loop table's by-sk: every item has sk).
	Indexes int

	mu   sync.Mutex
	kind string
	used map[string]Units
}

// NewMeter returns a meter over api for a table with indexes GSIs that
// project every item.
func NewMeter(api ddbstore.API, indexes int) *Meter {
	return &Meter{API: api, Indexes: indexes, used: map[string]Units{}}
}

// Kind charges the calls that follow to kind.
func (m *Meter) Kind(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kind = kind
}

// Used returns what kind consumed so far.
func (m *Meter) Used(kind string) Units {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used[kind]
}

// UsedBy returns what op (PutItem, UpdateItem, GetItem, Query) consumed
// for kind so far.
func (m *Meter) UsedBy(kind, op string) Units {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used[kind+"/"+op]
}

func (m *Meter) charge(op string, u Units) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range []string{m.kind, m.kind + "/" + op} {
		c := m.used[k]
		c.Read += u.Read
		c.Write += u.Write
		m.used[k] = c
	}
}

// writeUnits is a write of an item of size bytes: 1 unit per KB, rounded
// up, for the table and for each index the item is projected into.
func (m *Meter) writeUnits(size int) float64 {
	return math.Ceil(float64(max(size, 1))/1024) * float64(1+m.Indexes)
}

// readUnits is a read of bytes: 1 unit per 4 KB, rounded up over the
// whole response (a query, not per item), half for an eventually
// consistent read.
func readUnits(bytes int, consistent bool) float64 {
	u := math.Ceil(float64(max(bytes, 1)) / 4096)
	if !consistent {
		u /= 2
	}
	return u
}

// PutItem charges the item written.
func (m *Meter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := m.API.PutItem(ctx, in, opts...)
	if err == nil {
		m.charge("PutItem", Units{Write: m.writeUnits(ItemSize(in.Item))})
	}
	return out, err
}

// UpdateItem charges the item as it is after the update (the larger of
// before and after, for the small counters the leases update).
func (m *Meter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := m.API.UpdateItem(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	after, err := m.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return out, err
	}
	m.charge("UpdateItem", Units{Write: m.writeUnits(ItemSize(after.Item))})
	return out, nil
}

// GetItem charges the item read.
func (m *Meter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := m.API.GetItem(ctx, in, opts...)
	if err == nil {
		m.charge("GetItem", Units{Read: readUnits(ItemSize(out.Item), aws.ToBool(in.ConsistentRead))})
	}
	return out, err
}

// Query charges every item the key condition reads, before any filter
// and whatever is selected or projected: it runs the same page again
// without them to see those items.
func (m *Meter) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := m.API.Query(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	raw := *in
	raw.FilterExpression, raw.Select, raw.ProjectionExpression = nil, "", nil
	names := map[string]string{}
	for k, v := range in.ExpressionAttributeNames {
		if strings.Contains(aws.ToString(in.KeyConditionExpression), k) {
			names[k] = v
		}
	}
	raw.ExpressionAttributeNames = names
	if len(names) == 0 {
		raw.ExpressionAttributeNames = nil
	}
	vals := map[string]types.AttributeValue{}
	for k, v := range in.ExpressionAttributeValues {
		if strings.Contains(aws.ToString(in.KeyConditionExpression), k) {
			vals[k] = v
		}
	}
	raw.ExpressionAttributeValues = vals
	all, err := m.API.Query(ctx, &raw, opts...)
	if err != nil {
		return out, err
	}
	bytes := 0
	for _, item := range all.Items {
		bytes += ItemSize(item)
	}
	m.charge("Query", Units{Read: readUnits(bytes, in.IndexName == nil && aws.ToBool(in.ConsistentRead))})
	return out, err
}

// ItemSize is an item's size as DynamoDB bills it: each attribute's name
// and value (strings and binaries by their bytes, numbers about one byte
// per two significant digits plus one, lists and maps 3 bytes plus one per
// element plus their elements).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberM:
		return 3 + len(v.Value) + ItemSize(v.Value)
	case *types.AttributeValueMemberL:
		n := 3 + len(v.Value)
		for _, e := range v.Value {
			n += valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	default: // BOOL, NULL
		return 1
	}
}

func numberSize(s string) int {
	digits := strings.Trim(strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.SplitN(strings.ToLower(s), "e", 2)[0]), "0")
	return (len(digits)+1)/2 + 1
}
