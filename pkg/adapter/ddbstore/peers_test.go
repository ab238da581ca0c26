package ddbstore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// queryItems answers every Query with items, in one page.
type queryItems struct {
	API
	items []map[string]types.AttributeValue
}

func (q queryItems) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{Items: q.items, Count: int32(len(q.items))}, nil
}

func lease(loop, instance string, expires time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": ddbitem.Str(peerPK(loop, instance)), "sk": ddbitem.Str(SortPeer),
		"loop": ddbitem.Str(loop), "instance": ddbitem.Str(instance), "stored": ddbitem.Integer(3),
		"started_at": ddbitem.Timestamp(expires.Add(-time.Minute)), "reported_at": ddbitem.Timestamp(expires.Add(-10 * time.Second)),
		"expires_at": ddbitem.Timestamp(expires), "expires_ms": ddbitem.Integer(expires.UnixMilli()),
	}
}

// TestPeersSkipsMalformedLease: a lease item that does not decode (any
// consumer role can write one) is skipped with a logged reason; the other
// leases of every loop are read.
func TestPeersSkipsMalformedLease(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	bad := lease("orders", "i-bad", at)
	bad["stored"] = ddbitem.Str("lots")
	noLoop := lease("orders", "i-noloop", at)
	delete(noLoop, "loop")
	var logged bytes.Buffer
	s := New(queryItems{items: []map[string]types.AttributeValue{lease("orders", "i-1", at), bad, noLoop, lease("billing", "i-2", at)}}, "t").
		WithLog(slog.New(slog.NewTextHandler(&logged, nil)))
	peers, err := s.Peers(context.Background())
	if err != nil {
		t.Fatalf("Peers with one malformed lease: %v; want the others read", err)
	}
	if len(peers["orders"]) != 1 || peers["orders"][0].Instance != "i-1" || len(peers["billing"]) != 1 {
		t.Errorf("Peers = %+v; want i-1 of orders and i-2 of billing", peers)
	}
	if out := logged.String(); !strings.Contains(out, "i-bad") || !strings.Contains(out, "stored") || !strings.Contains(out, "i-noloop") {
		t.Errorf("log %q; want the skipped leases' keys and reasons", out)
	}
}

// TestLeaseItemRoundTrip: every field a consumer reports reaches the
// controller through the item, in both layouts (the inner loop's Withheld
// too: without it the controller reads a cut as a plant that took less;
// and its latency and reference, which the dashboard charts).
func TestLeaseItemRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	p := protocol.Peer{Loop: "orders", Instance: "i-1", Stored: 900, Batches: 90, BatchMessages: 900,
		Working: 3 * time.Second, Withheld: 42, InnerLatency: 7 * time.Millisecond, InnerReference: 5 * time.Millisecond,
		StartedAt: at, ReportedAt: at.Add(time.Minute), ExpiresAt: at.Add(time.Minute + 15*time.Second)}
	for _, layout := range []int{1, 2} {
		got, err := ddbitem.DecodePeer(LeaseItem(p, layout))
		if err != nil || got != p {
			t.Errorf("layout %d: DecodePeer(LeaseItem(p)) = %+v, %v; want %+v", layout, got, err, p)
		}
	}
}
