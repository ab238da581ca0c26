package ddbitem

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// DecodePeer reads a consumer's lease (a PEER item).
func DecodePeer(item map[string]types.AttributeValue) (protocol.Peer, error) {
	r := NewReader(item)
	p := protocol.Peer{Loop: r.S("loop"), Instance: r.S("instance"), Stored: r.Whole("stored"),
		StartedAt: r.TS("started_at"), ReportedAt: r.TS("reported_at"), ExpiresAt: r.TS("expires_at")}
	if _, ok := item["batches"]; ok { // leases of consumers that report their batches
		p.Batches, p.BatchMessages = r.Whole("batches"), r.Whole("batch_messages")
		p.Working = time.Duration(r.Whole("working_ns"))
	}
	if _, ok := item["withheld"]; ok { // consumers whose inner loop cut their pace
		p.Withheld = r.Whole("withheld")
	}
	if _, ok := item["inner_latency_ns"]; ok { // consumers that run an inner loop
		p.InnerLatency = time.Duration(r.Whole("inner_latency_ns"))
	}
	if _, ok := item["inner_ref_ns"]; ok {
		p.InnerReference = time.Duration(r.Whole("inner_ref_ns"))
	}
	return p, r.Err()
}

// QueryBySort calls each for every item whose sort key is sk, in one
// paginated query on the by-sk index; what names the items in an error.
func QueryBySort(ctx context.Context, api dynamodb.QueryAPIClient, table, sk, what string, each func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		IndexName:                 aws.String(IndexBySort),
		KeyConditionExpression:    aws.String("sk = :sk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":sk": Str(sk)},
	}
	for pages := dynamodb.NewQueryPaginator(api, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("dynamodb list %s (index %s of %s): %w", what, IndexBySort, table, err)
		}
		for _, item := range out.Items {
			if err := each(item); err != nil {
				return err
			}
		}
	}
	return nil
}
