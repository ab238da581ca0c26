package ddbstore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// ReadRate returns the RATE item of loopID, or an error wrapping
// protocol.ErrNotFound when the loop has none. The read is strongly consistent.
func (s *Store) ReadRate(ctx context.Context, loopID string) (protocol.Rate, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            ddbitem.Key(loopID, SortRate),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return protocol.Rate{}, ddbitem.Wrap("read RATE", loopID, err)
	}
	if len(out.Item) == 0 {
		return protocol.Rate{}, ddbitem.Wrap("read RATE", loopID, protocol.ErrNotFound)
	}
	r, err := ddbitem.DecodeRate(out.Item)
	if err != nil {
		return protocol.Rate{}, ddbitem.Wrap("decode RATE", loopID, err)
	}
	s.leases.saw(r)
	return r, nil
}

// WriteRate writes the RATE item of r.Loop unconditionally. The controller
// writes RATE together with STATE in one transaction (CommitTick); WriteRate
// is for operators, tests and tools.
func (s *Store) WriteRate(ctx context.Context, r protocol.Rate) error {
	if r.Loop == "" {
		return fmt.Errorf("dynamodb write RATE: the item names no loop; want its loop id")
	}
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item:      ddbitem.EncodeRate(r),
	})
	if err != nil {
		return ddbitem.Wrap("write RATE", r.Loop, err)
	}
	return nil
}
