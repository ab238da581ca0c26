package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/dashboard"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// paramsStore reads and writes a loop's PARAMS item and reads its
// PARAMS_STATUS for the dashboard. The attributes are converted to Go values
// the way loop.DecodeParams reads them (S string, N float64, BOOL bool, M
// map, L slice, NULL nil).
//
// It is the dashboard's own adapter until pkg/adapter/ddbstore exports a
// raw PARAMS read and write; it uses the same table layout (pk, sk "PARAMS"
// and "PARAMS_STATUS").
type paramsStore struct {
	client *dynamodb.Client
	table  string
	now    func() time.Time
}

var (
	_ dashboard.ParamsReader = (*paramsStore)(nil)
	_ dashboard.ParamsWriter = (*paramsStore)(nil)
)

func newParamsStore(client *dynamodb.Client, table string) *paramsStore {
	return &paramsStore{client: client, table: table, now: time.Now}
}

// paramsValidator validates with the controller's own decoder.
func paramsValidator() dashboard.Validator {
	return dashboard.ValidatorFunc(func(id string, p dashboard.Params) error {
		_, err := loop.DecodeParams(id, p)
		return err
	})
}

func (s *paramsStore) get(ctx context.Context, id, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: id},
			"sk": &types.AttributeValueMemberS{Value: sk},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("read %s of loop %s: %w", sk, id, err)
	}
	return out.Item, nil
}

// Params returns the PARAMS item as stored, and the controller's refusal of
// it when PARAMS_STATUS says it refused this very item (same fingerprint).
func (s *paramsStore) Params(ctx context.Context, id string) (dashboard.ParamsStatus, error) {
	item, err := s.get(ctx, id, "PARAMS")
	if err != nil {
		return dashboard.ParamsStatus{}, err
	}
	if item == nil {
		return dashboard.ParamsStatus{}, fmt.Errorf("PARAMS of loop %s: %w", id, dashboard.ErrNotFound)
	}
	attrs := fromItem(item)
	var st dashboard.ParamsStatus
	if v, ok := attrs["updated_at"].(string); ok {
		st.UpdatedAt, _ = time.Parse(time.RFC3339Nano, v)
	}
	delete(attrs, "pk")
	delete(attrs, "sk")
	delete(attrs, "updated_at")
	delete(attrs, "updated_by")
	st.Params = attrs
	status, err := s.get(ctx, id, "PARAMS_STATUS")
	if err != nil {
		return dashboard.ParamsStatus{}, err
	}
	if status != nil {
		sa := fromItem(status)
		fp, _ := sa["fingerprint"].(string)
		full := fromItem(item)
		delete(full, "pk")
		delete(full, "sk")
		if sa["status"] == loop.StatusRefused && (fp == "" || fp == loop.Fingerprint(full)) {
			st.Refusal, _ = sa["reason"].(string)
		}
	}
	return st, nil
}

// SetParams replaces the PARAMS item with p, stamped with updated_at and
// updated_by = "dashboard".
func (s *paramsStore) SetParams(ctx context.Context, id string, p dashboard.Params) error {
	item := map[string]types.AttributeValue{}
	for k, v := range p {
		av, err := toAV(v)
		if err != nil {
			return fmt.Errorf("PARAMS of loop %s attribute %s: %w", id, k, err)
		}
		item[k] = av
	}
	item["pk"] = &types.AttributeValueMemberS{Value: id}
	item["sk"] = &types.AttributeValueMemberS{Value: "PARAMS"}
	item["updated_at"] = &types.AttributeValueMemberS{Value: s.now().UTC().Format(time.RFC3339Nano)}
	item["updated_by"] = &types.AttributeValueMemberS{Value: "dashboard"}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("write PARAMS of loop %s: %w", id, err)
	}
	return nil
}

func fromItem(item map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = fromAV(v)
	}
	return out
}

func fromAV(v types.AttributeValue) any {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return x.Value
	case *types.AttributeValueMemberN:
		f, err := strconv.ParseFloat(x.Value, 64)
		if err != nil {
			return x.Value
		}
		return f
	case *types.AttributeValueMemberBOOL:
		return x.Value
	case *types.AttributeValueMemberM:
		return fromItem(x.Value)
	case *types.AttributeValueMemberL:
		out := make([]any, len(x.Value))
		for i, e := range x.Value {
			out[i] = fromAV(e)
		}
		return out
	default:
		return nil
	}
}

func toAV(v any) (types.AttributeValue, error) {
	switch x := v.(type) {
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case string:
		return &types.AttributeValueMemberS{Value: x}, nil
	case float64:
		return &types.AttributeValueMemberN{Value: strconv.FormatFloat(x, 'g', -1, 64)}, nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: x}, nil
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(x))
		for k, e := range x {
			av, err := toAV(e)
			if err != nil {
				return nil, err
			}
			m[k] = av
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
	default:
		return nil, errors.New("unsupported value type " + fmt.Sprintf("%T", v))
	}
}
