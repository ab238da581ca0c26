package ddbstore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// SortPeer is the sort key of the consumers' lease items (protocol.Peer). A
// lease's partition key is "<loop>#<instance>", not the loop id: all leases
// of all loops then share the sort key, so that one paginated query on the
// by-sk index reads them for the whole tick (as PARAMS are listed), and a
// consumer counts its loop's live leases with one query on the same index.
// Their `ttl` lets DynamoDB delete them well after they lapsed.
const SortPeer = ddbitem.SortPeer

// peerPK is the partition key of instance's lease on loopID.
func peerPK(loopID, instance string) string { return loopID + "#" + instance }

// ReportPeer writes p's lease (one PutItem), replacing the instance's
// previous one (pkg/consume's PeerStore).
func (s *Store) ReportPeer(ctx context.Context, p protocol.Peer) error {
	if p.Loop == "" || p.Instance == "" {
		return fmt.Errorf("dynamodb report peer: the lease needs a loop id and an instance id; got %+v", p)
	}
	item := map[string]types.AttributeValue{
		"pk":          ddbitem.Str(peerPK(p.Loop, p.Instance)),
		"sk":          ddbitem.Str(SortPeer),
		"loop":        ddbitem.Str(p.Loop),
		"instance":    ddbitem.Str(p.Instance),
		"stored":      ddbitem.Integer(p.Stored),
		"started_at":  ddbitem.Timestamp(p.StartedAt),
		"reported_at": ddbitem.Timestamp(p.ReportedAt),
		"expires_at":  ddbitem.Timestamp(p.ExpiresAt),
		"expires_ms":  ddbitem.Integer(p.ExpiresAt.UnixMilli()),
		"ttl":         ddbitem.Integer(p.ExpiresAt.Add(2 * protocol.PeerRetention).Unix()),
	}
	if p.Batches != 0 {
		item["batches"] = ddbitem.Integer(p.Batches)
		item["batch_messages"] = ddbitem.Integer(p.BatchMessages)
		item["working_ns"] = ddbitem.Integer(int64(p.Working))
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return ddbitem.Wrap("report peer "+p.Instance, p.Loop, err)
	}
	return nil
}

// LivePeers counts loopID's leases in force at now: one query on the by-sk
// index (eventually consistent: a lease written a moment ago may not count
// yet), more only past 1 MB of leases.
func (s *Store) LivePeers(ctx context.Context, loopID string, now time.Time) (int, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		IndexName:                aws.String(IndexBySort),
		KeyConditionExpression:   aws.String("sk = :sk AND begins_with(pk, :prefix)"),
		FilterExpression:         aws.String("#loop = :loop AND expires_ms > :now"),
		ExpressionAttributeNames: map[string]string{"#loop": "loop"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":sk": ddbitem.Str(SortPeer), ":prefix": ddbitem.Str(loopID + "#"), ":loop": ddbitem.Str(loopID), ":now": ddbitem.Integer(now.UnixMilli()),
		},
		Select: types.SelectCount,
	}
	n := 0
	for pages := dynamodb.NewQueryPaginator(s.api, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return 0, ddbitem.Wrap("count live peers", loopID, err)
		}
		n += int(out.Count)
	}
	return n, nil
}

// Peers reads every lease of every loop (one paginated query on the by-sk
// index), keyed by loop id: what the controller reads at every tick. A
// lease item that does not decode (any consumer's role may write one) is
// skipped with a logged reason, so that it fails neither the query nor
// any loop's tick: that instance counts as absent, as a lapsed lease does.
func (s *Store) Peers(ctx context.Context) (map[string][]protocol.Peer, error) {
	peers := make(map[string][]protocol.Peer)
	err := ddbitem.QueryBySort(ctx, s.api, s.table, SortPeer, "consumer leases", func(item map[string]types.AttributeValue) error {
		p, err := ddbitem.DecodePeer(item)
		if err == nil && p.Loop == "" {
			err = fmt.Errorf("attribute loop is empty")
		}
		if err != nil {
			pk, _ := ddbitem.GetS(item, "pk")
			s.logger().WarnContext(ctx, "skipping a consumer lease that does not decode", "table", s.table, "pk", pk, "err", err)
			return nil
		}
		peers[p.Loop] = append(peers[p.Loop], p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return peers, nil
}
