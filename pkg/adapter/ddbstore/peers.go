package ddbstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// SortPeer is the sort key of the consumers' lease items (protocol.Peer). A
// lease's partition key is "<loop>#<instance>", not the loop id: all leases
// of all loops then share the sort key, so that one paginated query on the
// by-sk index reads them for the whole tick (as PARAMS are listed), and a
// consumer counts its loop's live leases with one query on the same index.
// Their `ttl` lets DynamoDB delete them well after they lapsed.
const SortPeer = "PEER"

// peerPK is the partition key of instance's lease on loopID.
func peerPK(loopID, instance string) string { return loopID + "#" + instance }

// ReportPeer writes p's lease (one PutItem), replacing the instance's
// previous one (pkg/consume's PeerStore).
func (s *Store) ReportPeer(ctx context.Context, p protocol.Peer) error {
	if p.Loop == "" || p.Instance == "" {
		return fmt.Errorf("dynamodb report peer: empty loop id or instance id in %+v", p)
	}
	item := map[string]types.AttributeValue{
		"pk":          str(peerPK(p.Loop, p.Instance)),
		"sk":          str(SortPeer),
		"loop":        str(p.Loop),
		"instance":    str(p.Instance),
		"stored":      integer(p.Stored),
		"started_at":  timestamp(p.StartedAt),
		"reported_at": timestamp(p.ReportedAt),
		"expires_at":  timestamp(p.ExpiresAt),
		"expires_ms":  integer(p.ExpiresAt.UnixMilli()),
		"ttl":         integer(p.ExpiresAt.Add(2 * protocol.PeerRetention).Unix()),
	}
	if p.Batches != 0 {
		item["batches"] = integer(p.Batches)
		item["batch_messages"] = integer(p.BatchMessages)
		item["working_ns"] = integer(int64(p.Working))
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return wrap("report peer "+p.Instance, p.Loop, err)
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
			":sk": str(SortPeer), ":prefix": str(loopID + "#"), ":loop": str(loopID), ":now": integer(now.UnixMilli()),
		},
		Select: types.SelectCount,
	}
	n := 0
	for pages := dynamodb.NewQueryPaginator(s.api, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return 0, wrap("count live peers", loopID, err)
		}
		n += int(out.Count)
	}
	return n, nil
}

// queryBySort calls each for every item whose sort key is sk, in one
// paginated query on the by-sk index; what names the items in an error.
func (s *Store) queryBySort(ctx context.Context, sk, what string, each func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(IndexBySort),
		KeyConditionExpression:    aws.String("sk = :sk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":sk": str(sk)},
	}
	for pages := dynamodb.NewQueryPaginator(s.api, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("dynamodb list %s (index %s of %s): %w", what, IndexBySort, s.table, err)
		}
		for _, item := range out.Items {
			if err := each(item); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadPeers reads every lease of every loop (one paginated query on the
// by-sk index), keyed by loop id.
func (s *Store) loadPeers(ctx context.Context) (map[string][]protocol.Peer, error) {
	peers := make(map[string][]protocol.Peer)
	err := s.queryBySort(ctx, SortPeer, "consumer leases", func(item map[string]types.AttributeValue) error {
		p, err := decodePeer(item)
		if err != nil {
			return fmt.Errorf("dynamodb decode consumer lease: %w", err)
		}
		peers[p.Loop] = append(peers[p.Loop], p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return peers, nil
}

func decodePeer(item map[string]types.AttributeValue) (protocol.Peer, error) {
	r := &itemReader{item: item}
	p := protocol.Peer{Loop: r.s("loop"), Instance: r.s("instance"), Stored: r.whole("stored"),
		StartedAt: r.ts("started_at"), ReportedAt: r.ts("reported_at"), ExpiresAt: r.ts("expires_at")}
	if _, ok := item["batches"]; ok { // leases of consumers that report their batches
		p.Batches, p.BatchMessages = r.whole("batches"), r.whole("batch_messages")
		p.Working = time.Duration(r.whole("working_ns"))
	}
	return p, r.err()
}

// getInt reads the whole number attribute name of item (not through
// float64, which loses counts above 2^53).
func getInt(item map[string]types.AttributeValue, name string) (int64, error) {
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

// encodeMapping and decodeMapping keep STATE's Mapping (the event source
// mapping's concurrency, its last update and error, the consumers' batch
// counts) in the attribute `mapping`, as JSON; absent for a loop that owns
// no mapping.
func encodeMapping(item map[string]types.AttributeValue, m loop.MappingState) error {
	if m.UUID == "" && m.Concurrency == 0 && m.Target == 0 && m.AttemptAt.IsZero() && m.Counts == nil && m.BatchSeconds == 0 {
		return nil
	}
	return setJSON(item, "mapping", m)
}

func decodeMapping(item map[string]types.AttributeValue, m *loop.MappingState) error {
	return getJSON(item, "mapping", m)
}

// encodeDemand and decodeDemand keep STATE's Demand (the consumers'
// counts at the last tick) in the attribute `demand`, as JSON.
func encodeDemand(item map[string]types.AttributeValue, d loop.Demand) error {
	if d.Stored == nil && !d.Known && d.Live == 0 {
		return nil
	}
	return setJSON(item, "demand", d)
}

func decodeDemand(item map[string]types.AttributeValue, d *loop.Demand) error {
	return getJSON(item, "demand", d)
}

// setJSON writes v as the JSON string attribute name of item.
func setJSON(item map[string]types.AttributeValue, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	item[name] = str(string(b))
	return nil
}

// getJSON reads the JSON string attribute name of item into v; nothing
// when it is absent.
func getJSON(item map[string]types.AttributeValue, name string, v any) error {
	s, err := optS(item, name)
	if err != nil || s == "" {
		return err
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
