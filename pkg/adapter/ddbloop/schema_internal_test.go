package ddbloop

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A STATE item of schema 2 kept the first signal's controller memory in
// its own attribute: read, it is the first signal's record's (a record
// without a name for a one-signal loop, which the loop's upgrade completes).
func TestDecodeStateLegacyController(t *testing.T) {
	item := map[string]types.AttributeValue{
		"pk":         &types.AttributeValueMemberS{Value: "l"},
		"sk":         &types.AttributeValueMemberS{Value: SortState},
		"version":    &types.AttributeValueMemberN{Value: "4"},
		"schema":     &types.AttributeValueMemberN{Value: "2"},
		"controller": &types.AttributeValueMemberS{Value: `{"init":true,"i":12.5}`},
	}
	st, err := decodeState(item)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Signals) != 1 || st.Signals[0].Name != "" || !st.Signals[0].Controller.Init || st.Signals[0].Controller.Integral != 12.5 {
		t.Fatalf("decodeState(schema 2).Signals = %+v; want one unnamed record with integrator 12.5", st.Signals)
	}
	enc, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := enc["controller"]; ok {
		t.Errorf("encodeState wrote the controller attribute of schema 2: %v", enc["controller"])
	}
}
