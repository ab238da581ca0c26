package ddbstore

import (
	"fmt"
	"math"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fromAV converts a DynamoDB attribute value to the Go values that
// loop.DecodeParams reads: string (S), float64 (N), bool (BOOL),
// map[string]any (M), []any (L and sets), nil (NULL), []byte (B).
func fromAV(av types.AttributeValue) any {
	switch x := av.(type) {
	case *types.AttributeValueMemberS:
		return x.Value
	case *types.AttributeValueMemberN:
		f, err := strconv.ParseFloat(x.Value, 64)
		if err != nil {
			// DynamoDB only stores valid numbers; keep the text so that
			// the decoder names it.
			return x.Value
		}
		return f
	case *types.AttributeValueMemberBOOL:
		return x.Value
	case *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberM:
		return fromItem(x.Value)
	case *types.AttributeValueMemberL:
		out := make([]any, len(x.Value))
		for i, v := range x.Value {
			out[i] = fromAV(v)
		}
		return out
	case *types.AttributeValueMemberSS:
		out := make([]any, len(x.Value))
		for i, v := range x.Value {
			out[i] = v
		}
		return out
	case *types.AttributeValueMemberNS:
		out := make([]any, len(x.Value))
		for i, v := range x.Value {
			out[i] = v
		}
		return out
	case *types.AttributeValueMemberB:
		return x.Value
	default:
		return fmt.Sprintf("%T", av)
	}
}

func fromItem(item map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = fromAV(v)
	}
	return out
}

// toAV converts a Go value (as fromAV returns, plus int and json-like
// numbers) to a DynamoDB attribute value.
func toAV(v any) (types.AttributeValue, error) {
	switch x := v.(type) {
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case string:
		return str(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v cannot be stored in DynamoDB", x)
		}
		return num(x), nil
	case int:
		return integer(int64(x)), nil
	case int64:
		return integer(x), nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: x}, nil
	case []byte:
		return &types.AttributeValueMemberB{Value: x}, nil
	case map[string]any:
		m, err := toItem(x)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case map[string]string:
		m := make(map[string]types.AttributeValue, len(x))
		for k, s := range x {
			m[k] = str(s)
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case []any:
		l := make([]types.AttributeValue, len(x))
		for i, e := range x {
			av, err := toAV(e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case fmt.Stringer:
		return str(x.String()), nil
	default:
		return nil, fmt.Errorf("value of type %T cannot be stored", v)
	}
}

func toItem(m map[string]any) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		av, err := toAV(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}
