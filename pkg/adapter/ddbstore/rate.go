package ddbstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// ReadRate returns the RATE item of loopID, or an error wrapping
// protocol.ErrNotFound when the loop has none. The read is strongly consistent.
func (s *Store) ReadRate(ctx context.Context, loopID string) (protocol.Rate, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(loopID, SortRate),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return protocol.Rate{}, wrap("read RATE", loopID, err)
	}
	if len(out.Item) == 0 {
		return protocol.Rate{}, wrap("read RATE", loopID, protocol.ErrNotFound)
	}
	r, err := decodeRate(out.Item)
	if err != nil {
		return protocol.Rate{}, wrap("decode RATE", loopID, err)
	}
	return r, nil
}

// WriteRate writes the RATE item of r.Loop unconditionally. The controller
// writes RATE together with STATE in one transaction (CommitTick); WriteRate
// is for operators, tests and tools.
func (s *Store) WriteRate(ctx context.Context, r protocol.Rate) error {
	if r.Loop == "" {
		return fmt.Errorf("dynamodb write RATE: empty loop id")
	}
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item:      encodeRate(r),
	})
	if err != nil {
		return wrap("write RATE", r.Loop, err)
	}
	return nil
}

func key(loopID, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: loopID},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

func num(f float64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(f, 'g', -1, 64)}
}

func integer(i int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(i, 10)}
}

func str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

func timestamp(t time.Time) *types.AttributeValueMemberS {
	return str(t.UTC().Format(time.RFC3339Nano))
}

func encodeRate(r protocol.Rate) map[string]types.AttributeValue {
	item := key(r.Loop, SortRate)
	item["rate"] = num(r.PerSecond)
	item["written_at"] = timestamp(r.WrittenAt)
	item["expires_at"] = timestamp(r.ExpiresAt)
	item["tick"] = integer(r.Tick)
	if len(r.Weights) > 0 {
		m := make(map[string]types.AttributeValue, len(r.Weights))
		for k, v := range r.Weights {
			m[k] = num(v)
		}
		item["weights"] = &types.AttributeValueMemberM{Value: m}
	}
	return item
}

func decodeRate(item map[string]types.AttributeValue) (protocol.Rate, error) {
	var r protocol.Rate
	var err error
	if r.Loop, err = getS(item, "pk"); err != nil {
		return r, err
	}
	if r.PerSecond, err = getN(item, "rate"); err != nil {
		return r, err
	}
	if r.WrittenAt, err = getTime(item, "written_at"); err != nil {
		return r, err
	}
	if r.ExpiresAt, err = getTime(item, "expires_at"); err != nil {
		return r, err
	}
	if _, ok := item["tick"]; ok {
		t, err := getN(item, "tick")
		if err != nil {
			return r, err
		}
		r.Tick = int64(t)
	}
	if av, ok := item["weights"]; ok {
		m, ok := av.(*types.AttributeValueMemberM)
		if !ok {
			return r, fmt.Errorf("attribute weights: want a map (M), got %s", typeName(av))
		}
		r.Weights = make(map[string]float64, len(m.Value))
		for k := range m.Value {
			v, err := getN(m.Value, k)
			if err != nil {
				return r, fmt.Errorf("weights: %w", err)
			}
			r.Weights[k] = v
		}
	}
	return r, nil
}

func getS(item map[string]types.AttributeValue, name string) (string, error) {
	av, ok := item[name]
	if !ok {
		return "", fmt.Errorf("attribute %s: missing", name)
	}
	s, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s: want a string (S), got %s", name, typeName(av))
	}
	return s.Value, nil
}

func getN(item map[string]types.AttributeValue, name string) (float64, error) {
	av, ok := item[name]
	if !ok {
		return 0, fmt.Errorf("attribute %s: missing", name)
	}
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s: want a number (N), got %s", name, typeName(av))
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %q is not a number", name, n.Value)
	}
	return f, nil
}

func getTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	s, err := getS(item, name)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("attribute %s: %q is not an RFC 3339 time", name, s)
	}
	return t, nil
}

// typeName names the DynamoDB type of av the way the console does.
func typeName(av types.AttributeValue) string {
	switch av.(type) {
	case *types.AttributeValueMemberS:
		return "string (S)"
	case *types.AttributeValueMemberN:
		return "number (N)"
	case *types.AttributeValueMemberBOOL:
		return "boolean (BOOL)"
	case *types.AttributeValueMemberM:
		return "map (M)"
	case *types.AttributeValueMemberL:
		return "list (L)"
	case *types.AttributeValueMemberNULL:
		return "null (NULL)"
	case *types.AttributeValueMemberSS:
		return "string set (SS)"
	case *types.AttributeValueMemberNS:
		return "number set (NS)"
	case *types.AttributeValueMemberB:
		return "binary (B)"
	case *types.AttributeValueMemberBS:
		return "binary set (BS)"
	default:
		return fmt.Sprintf("%T", av)
	}
}
