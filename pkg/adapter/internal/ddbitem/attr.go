package ddbitem

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Key is the key of the item sk of loopID.
func Key(loopID, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: loopID},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

// Num is f as a number attribute (N), exactly.
func Num(f float64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(f, 'g', -1, 64)}
}

// Integer is i as a number attribute (N), exactly.
func Integer(i int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(i, 10)}
}

// Str is s as a string attribute (S).
func Str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

// Timestamp is t as an RFC 3339 string attribute (S) in UTC, to the nanosecond.
func Timestamp(t time.Time) *types.AttributeValueMemberS {
	return Str(t.UTC().Format(time.RFC3339Nano))
}

// GetS reads the required string attribute name of item.
func GetS(item map[string]types.AttributeValue, name string) (string, error) {
	av, ok := item[name]
	if !ok {
		return "", fmt.Errorf("attribute %s: missing", name)
	}
	s, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s: want a string (S), got %s", name, TypeName(av))
	}
	return s.Value, nil
}

// GetN reads the required number attribute name of item.
func GetN(item map[string]types.AttributeValue, name string) (float64, error) {
	av, ok := item[name]
	if !ok {
		return 0, fmt.Errorf("attribute %s: missing", name)
	}
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s: want a number (N), got %s", name, TypeName(av))
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %q is not a number", name, n.Value)
	}
	return f, nil
}

// GetInt reads the whole number attribute name of item (not through
// float64, which loses counts above 2^53).
func GetInt(item map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s: missing or not a number (N)", name)
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %q is not a whole number", name, n.Value)
	}
	return i, nil
}

// GetTime reads the required RFC 3339 time attribute name of item.
func GetTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	s, err := GetS(item, name)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("attribute %s: %q is not an RFC 3339 time", name, s)
	}
	return t, nil
}

// OptTime reads the time attribute name of item; zero when it is absent.
func OptTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	if _, ok := item[name]; !ok {
		return time.Time{}, nil
	}
	return GetTime(item, name)
}

// OptNum reads the number attribute name of item; def when it is absent.
func OptNum(item map[string]types.AttributeValue, name string, def float64) (float64, error) {
	if _, ok := item[name]; !ok {
		return def, nil
	}
	return GetN(item, name)
}

// OptS reads the string attribute name of item; "" when it is absent.
func OptS(item map[string]types.AttributeValue, name string) (string, error) {
	if _, ok := item[name]; !ok {
		return "", nil
	}
	return GetS(item, name)
}

// OptBool reads the boolean attribute name of item; false when it is absent.
func OptBool(item map[string]types.AttributeValue, name string) (bool, error) {
	av, ok := item[name]
	if !ok {
		return false, nil
	}
	b, ok := av.(*types.AttributeValueMemberBOOL)
	if !ok {
		return false, fmt.Errorf("attribute %s: want a boolean (BOOL), got %s", name, TypeName(av))
	}
	return b.Value, nil
}

// SetTime writes t as the attribute name of item, unless t is zero.
func SetTime(item map[string]types.AttributeValue, name string, t time.Time) {
	if !t.IsZero() {
		item[name] = Timestamp(t)
	}
}

// SetNum writes f as the attribute name of item, unless f is NaN or infinite
// (DynamoDB stores neither).
func SetNum(item map[string]types.AttributeValue, name string, f float64) {
	if !math.IsNaN(f) && !math.IsInf(f, 0) {
		item[name] = Num(f)
	}
}

// SetJSON writes v as the JSON string attribute name of item.
func SetJSON(item map[string]types.AttributeValue, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	item[name] = Str(string(b))
	return nil
}

// GetJSON reads the JSON string attribute name of item into v; nothing
// when it is absent.
func GetJSON(item map[string]types.AttributeValue, name string, v any) error {
	s, err := OptS(item, name)
	if err != nil || s == "" {
		return err
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// TypeName names the DynamoDB type of av the way the console does.
func TypeName(av types.AttributeValue) string {
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

// Wrap gives err the context of op on loopID.
func Wrap(op, loopID string, err error) error {
	return fmt.Errorf("dynamodb %s loop %q: %w", op, loopID, err)
}
