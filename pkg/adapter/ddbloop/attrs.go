package ddbloop

import (
	"fmt"
	"math"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
)

// toAV converts a Go value (as paramsAttrs returns, plus int and json-like
// numbers) to a DynamoDB attribute value. It is ours rather than
// attributevalue's: a NaN or infinite number is refused here with its
// attribute's name (attributevalue writes "NaN", which DynamoDB refuses
// without naming it), and a fmt.Stringer (a duration) is stored as its text.
func toAV(v any) (types.AttributeValue, error) {
	switch x := v.(type) {
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case string:
		return ddbitem.Str(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v cannot be stored in DynamoDB", x)
		}
		return ddbitem.Num(x), nil
	case int:
		return ddbitem.Integer(int64(x)), nil
	case int64:
		return ddbitem.Integer(x), nil
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
			m[k] = ddbitem.Str(s)
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
		return ddbitem.Str(x.String()), nil
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
