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

// SortPeer is the sort key of the version 1 leases (protocol.Peer), whose
// partition key is "<loop>#<instance>": all leases of all loops share the
// sort key, so that one paginated query on the by-sk index reads them all,
// and a version 1 consumer counts its loop's live leases with one query on
// the same index, paying for every lapsed lease until its TTL.
const SortPeer = ddbitem.SortPeer

// The version 2 lease layout (protocol.LatestLayout): a loop's leases and
// live counts under the loop's own partition "<loop>#LEASES", a lease's
// sort key "PEER#<instance>", a live count's "LIVE#<loop>#<bucket>"
// (protocol.BucketOf, 12 digits), so that neither the table nor the by-sk
// index has a key that every loop shares, and a consumer reads two small
// counts instead of every lease. docs/protocol.md specifies both layouts.
const (
	LeasePartitionSuffix = "#LEASES"
	LeaseSortPrefix      = "PEER#"
	LiveSortPrefix       = "LIVE#"
)

// peerPK is the partition key of instance's version 1 lease on loopID.
func peerPK(loopID, instance string) string { return loopID + "#" + instance }

// LeasePK is the partition key of loopID's version 2 leases and counts.
func LeasePK(loopID string) string { return loopID + LeasePartitionSuffix }

// LiveSK is the sort key of loopID's live count of bucket.
func LiveSK(loopID string, bucket int64) string {
	return fmt.Sprintf("%s%s#%012d", LiveSortPrefix, loopID, bucket)
}

// liveTTL is how long a live count outlives its bucket.
const liveTTL = time.Hour

// ReportPeer writes p's lease, replacing the instance's previous one, in
// the layout of the RATE this store read last for p.Loop
// (protocol.Rate.LeaseLayout; the store reads RATE once first when it has
// not; version 1 while there is none). Version
// 1: one PutItem. Version 2: one PutItem, one UpdateItem on the bucket's
// live count the first time the instance reports in a bucket (a lapsed
// lease, Lease.Close, takes the instance out of the counts it is in), and
// while RATE reports legacy consumers the version 1 lease as well, so
// that they count this instance.
func (s *Store) ReportPeer(ctx context.Context, p protocol.Peer) error {
	if p.Loop == "" || p.Instance == "" {
		return fmt.Errorf("dynamodb report peer: the lease needs a loop id and an instance id; got %+v", p)
	}
	seen := s.layoutOf(ctx, p.Loop)
	if seen.LeaseLayout() < 2 || seen.LegacyLive > 0 {
		if err := s.put(ctx, p, LeaseItem(p, 1)); err != nil {
			return err
		}
	}
	if seen.LeaseLayout() < 2 {
		return nil
	}
	if err := s.put(ctx, p, LeaseItem(p, 2)); err != nil {
		return err
	}
	return s.count(ctx, p)
}

// layoutOf returns the version and legacy count of the RATE last read for
// loopID; before the first read (a consumer's first refresh comes before
// its first RATE read) it reads RATE once, so that an instance that
// starts does not write and count in layout 1 when the controller reads
// layout 2. A failed read leaves layout 1.
func (s *Store) layoutOf(ctx context.Context, loopID string) protocol.Rate {
	if s.leases.ask(loopID) {
		_, _ = s.ReadRate(ctx, loopID)
	}
	return s.leases.rate(loopID)
}

func (s *Store) put(ctx context.Context, p protocol.Peer, item map[string]types.AttributeValue) error {
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return ddbitem.Wrap("report peer "+p.Instance, p.Loop, err)
	}
	return nil
}

// LeaseItem is p's lease item in layout 1 or 2.
func LeaseItem(p protocol.Peer, layout int) map[string]types.AttributeValue {
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
	if layout >= 2 {
		item["pk"], item["sk"] = ddbitem.Str(LeasePK(p.Loop)), ddbitem.Str(LeaseSortPrefix+p.Instance)
		item["v"] = ddbitem.Integer(int64(layout))
	}
	if p.Batches != 0 {
		item["batches"] = ddbitem.Integer(p.Batches)
		item["batch_messages"] = ddbitem.Integer(p.BatchMessages)
		item["working_ns"] = ddbitem.Integer(int64(p.Working))
	}
	if p.Withheld != 0 {
		item["withheld"] = ddbitem.Integer(p.Withheld)
	}
	if p.InnerLatency > 0 {
		item["inner_latency_ns"] = ddbitem.Integer(int64(p.InnerLatency))
	}
	if p.InnerReference > 0 {
		item["inner_ref_ns"] = ddbitem.Integer(int64(p.InnerReference))
	}
	return item
}

// count adds p's instance to the live count of its report's bucket, once
// per bucket, or, for a lapsed lease, takes it out of the counts it is in.
func (s *Store) count(ctx context.Context, p protocol.Peer) error {
	if !p.Live(p.ReportedAt) {
		for _, b := range s.leases.forget(p.Loop, p.Instance) {
			if b >= protocol.BucketOf(p.ReportedAt)-1 {
				if err := s.addLive(ctx, p.Loop, b, -1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	b := protocol.BucketOf(p.ReportedAt)
	if s.leases.counted(p.Loop, p.Instance, b) {
		return nil
	}
	if err := s.addLive(ctx, p.Loop, b, 1); err != nil {
		return err
	}
	s.leases.count(p.Loop, p.Instance, b)
	return nil
}

func (s *Store) addLive(ctx context.Context, loopID string, bucket, delta int64) error {
	end := time.Unix((bucket+1)*int64(protocol.LiveBucket/time.Second), 0)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       map[string]types.AttributeValue{"pk": ddbitem.Str(LeasePK(loopID)), "sk": ddbitem.Str(LiveSK(loopID, bucket))},
		UpdateExpression:          aws.String("ADD n :d SET #ttl = :ttl, #loop = :loop"),
		ExpressionAttributeNames:  map[string]string{"#ttl": "ttl", "#loop": "loop"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": ddbitem.Integer(delta), ":ttl": ddbitem.Integer(end.Add(liveTTL).Unix()), ":loop": ddbitem.Str(loopID)},
	})
	if err != nil {
		return ddbitem.Wrap(fmt.Sprintf("add %d to the live count of bucket %d", delta, bucket), loopID, err)
	}
	return nil
}

// LivePeers counts loopID's consumer instances in force at now, in the
// layout of the RATE this store read last for loopID. Version 2: one
// eventually consistent query of two small items (the live counts of
// now's bucket and of the previous one), plus RATE's legacy_live; version
// 1: one query on the by-sk index over all of the loop's leases, live or
// lapsed (more past 1 MB of them).
func (s *Store) LivePeers(ctx context.Context, loopID string, now time.Time) (int, error) {
	seen := s.layoutOf(ctx, loopID)
	if seen.LeaseLayout() < 2 {
		return s.liveV1(ctx, loopID, now)
	}
	b := protocol.BucketOf(now)
	out, err := s.api.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": ddbitem.Str(LeasePK(loopID)), ":from": ddbitem.Str(LiveSK(loopID, b-1)), ":to": ddbitem.Str(LiveSK(loopID, b)),
		},
	})
	if err != nil {
		return 0, ddbitem.Wrap("read the live counts", loopID, err)
	}
	var prev, cur int64
	for _, item := range out.Items {
		sk, _ := ddbitem.GetS(item, "sk")
		n, err := ddbitem.GetInt(item, "n")
		if err != nil {
			return 0, ddbitem.Wrap("decode live count "+sk, loopID, err)
		}
		if sk == LiveSK(loopID, b) {
			cur = n
		} else {
			prev = n
		}
	}
	return protocol.LiveCount(prev, cur, seen.LegacyLive), nil
}

func (s *Store) liveV1(ctx context.Context, loopID string, now time.Time) (int, error) {
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

// Peers reads every version 1 lease of every loop (one paginated query on
// the by-sk index), keyed by loop id: what the controller reads at every
// tick, with LoopPeers for the version 2 leases. A lease item that does not
// decode (any consumer's role may write one) is skipped with a logged
// reason, so that it fails neither the query nor any loop's tick: that
// instance counts as absent, as a lapsed lease does.
func (s *Store) Peers(ctx context.Context) (map[string][]protocol.Peer, error) {
	peers := make(map[string][]protocol.Peer)
	err := ddbitem.QueryBySort(ctx, s.api, s.table, SortPeer, "consumer leases", func(item map[string]types.AttributeValue) error {
		if p, ok := s.decodeLease(ctx, item, ""); ok {
			peers[p.Loop] = append(peers[p.Loop], p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return peers, nil
}

// LoopPeers reads loopID's version 2 leases (one query on the loop's lease
// partition, more past 1 MB of them), skipping those that do not decode as
// Peers does.
func (s *Store) LoopPeers(ctx context.Context, loopID string) ([]protocol.Peer, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": ddbitem.Str(LeasePK(loopID)), ":prefix": ddbitem.Str(LeaseSortPrefix),
		},
	}
	var peers []protocol.Peer
	for pages := dynamodb.NewQueryPaginator(s.api, in); pages.HasMorePages(); {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, ddbitem.Wrap("read the leases", loopID, err)
		}
		for _, item := range out.Items {
			if p, ok := s.decodeLease(ctx, item, loopID); ok {
				peers = append(peers, p)
			}
		}
	}
	return peers, nil
}

// decodeLease decodes a lease item; one that does not decode, or does not
// name loopID (when given), is logged and skipped.
func (s *Store) decodeLease(ctx context.Context, item map[string]types.AttributeValue, loopID string) (protocol.Peer, bool) {
	p, err := ddbitem.DecodePeer(item)
	switch {
	case err != nil:
	case p.Loop == "":
		err = fmt.Errorf("attribute loop is empty")
	case loopID != "" && p.Loop != loopID:
		err = fmt.Errorf("attribute loop is %q, in the lease partition of loop %q", p.Loop, loopID)
	}
	if err != nil {
		pk, _ := ddbitem.GetS(item, "pk")
		sk, _ := ddbitem.GetS(item, "sk")
		s.logger().WarnContext(ctx, "skipping a consumer lease that does not decode", "table", s.table, "pk", pk, "sk", sk, "err", err)
		return p, false
	}
	return p, true
}
