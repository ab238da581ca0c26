package ddbhistory

import (
	"fmt"
	"math"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// item is the layout of a history item (see the package doc), converted to
// and from DynamoDB by attributevalue. T is a pointer because items written
// before t was stored have their time only in the sort key.
type item struct {
	PK         string   `dynamodbav:"pk"`
	SK         string   `dynamodbav:"sk"`
	T          *int64   `dynamodbav:"t"`
	Setpoint   nullable `dynamodbav:"setpoint"`
	Measured   nullable `dynamodbav:"measured"`
	Rate       nullable `dynamodbav:"rate"`
	Consumed   nullable `dynamodbav:"consumed"`
	Smoothing  float64  `dynamodbav:"consumed_smoothing_s,omitempty"`
	P          nullable `dynamodbav:"p"`
	I          nullable `dynamodbav:"i"`
	FF         nullable `dynamodbav:"ff"`
	Saturated  bool     `dynamodbav:"saturated"`
	Limited    bool     `dynamodbav:"limited"`
	Stale      bool     `dynamodbav:"stale"`
	ModelDrift bool     `dynamodbav:"model_drift,omitempty"`
	Depth      nullable `dynamodbav:"depth"`
	Mode       string   `dynamodbav:"mode"`
	Limiting   string   `dynamodbav:"limiting,omitempty"`
	Signals    string   `dynamodbav:"signals,omitempty"` // JSON of history.Point.Signals
	Reason     string   `dynamodbav:"reason,omitempty"`
	ReasonText string   `dynamodbav:"reason_text,omitempty"`
	// The consumers' inner loop (history.Point.InnerLatency, ...): ms, ms,
	// messages/s; absent while none runs.
	InnerLatency   float64 `dynamodbav:"inner_latency_ms,omitempty"`
	InnerReference float64 `dynamodbav:"inner_reference_ms,omitempty"`
	Withheld       float64 `dynamodbav:"withheld,omitempty"`
	TTL            int64   `dynamodbav:"ttl"`
}

// nullable is a number that is NULL in DynamoDB when it is NaN or infinite
// (a stale measurement, an unknown depth), which DynamoDB cannot store as a
// number; NULL reads back as NaN. attributevalue alone would write "NaN".
type nullable float64

// MarshalDynamoDBAttributeValue implements attributevalue.Marshaler.
func (v nullable) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
		return &types.AttributeValueMemberNULL{Value: true}, nil
	}
	return &types.AttributeValueMemberN{Value: strconv.FormatFloat(float64(v), 'g', -1, 64)}, nil
}

// UnmarshalDynamoDBAttributeValue implements attributevalue.Unmarshaler.
func (v *nullable) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	switch x := av.(type) {
	case *types.AttributeValueMemberN:
		f, err := strconv.ParseFloat(x.Value, 64)
		if err != nil {
			return fmt.Errorf("number %q: %w", x.Value, err)
		}
		*v = nullable(f)
	case nil, *types.AttributeValueMemberNULL:
		*v = nullable(math.NaN())
	default:
		return fmt.Errorf("want a number, got %T", av)
	}
	return nil
}
