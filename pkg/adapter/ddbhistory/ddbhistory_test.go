package ddbhistory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/history/historytest"
)

// The adapters serve the dashboard's readers.
var (
	_ dashboard.HistoryReader = (*ddbhistory.Store)(nil)
	_ dashboard.LoopLister    = (*ddbhistory.Store)(nil)
	_ dashboard.HistoryReader = (*ddbhistory.Memory)(nil)
)

// newTable creates a fresh table (pk, sk) on the local AWS endpoint.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	testenv.AWSEndpoint(t)
	return ddbtest.Table(t, "sluice-hist")
}

func TestMemoryContract(t *testing.T) {
	historytest.Run(t, func(t *testing.T) historytest.Store { return ddbhistory.NewMemory(0) })
}

func TestMemoryCapacity(t *testing.T) {
	ctx := context.Background()
	m := ddbhistory.NewMemory(5)
	t0 := time.Unix(0, 0)
	for k := range 12 {
		_ = m.Append(ctx, "a", historytest.Point(t0, k))
	}
	got, _ := m.Last(ctx, "a", 0)
	if len(got) != 5 || !historytest.Same(got[0], historytest.Point(t0, 7)) {
		t.Fatalf("Memory(5) after 12 appends holds %d points starting %v; want 5 starting at point 7", len(got), got[0].T)
	}
}

func TestStoreContract(t *testing.T) {
	historytest.Run(t, func(t *testing.T) historytest.Store {
		c, table := newTable(t)
		return ddbhistory.New(c, table)
	})
}

func TestStoreItemTTLAndLoops(t *testing.T) {
	ctx := context.Background()
	c, table := newTable(t)
	s := ddbhistory.New(c, table, ddbhistory.WithRetention(48*time.Hour))
	t0 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	if err := s.Append(ctx, "orders", historytest.Point(t0, 0)); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "orders"},
		"sk": &types.AttributeValueMemberS{Value: ddbhistory.SortKey(t0)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ttl, _ := out.Item["ttl"].(*types.AttributeValueMemberN)
	if want := fmt.Sprint(t0.Add(48 * time.Hour).Unix()); ttl == nil || ttl.Value != want {
		t.Errorf("ttl = %v; want %s", out.Item["ttl"], want)
	}
	if _, ok := out.Item["measured"].(*types.AttributeValueMemberNULL); !ok {
		t.Errorf("measured of a stale point = %#v; want NULL", out.Item["measured"])
	}
	for _, id := range []string{"orders", "billing"} {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: "PARAMS"},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	loops, err := s.Loops(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(sorted(loops), ",") != "billing,orders" {
		t.Errorf("Loops() = %v; want [billing orders]", loops)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestSortKeyOrdersByTime(t *testing.T) {
	tests := []struct{ a, b time.Time }{
		{time.Unix(9, 0), time.Unix(10, 0)},
		{time.Unix(999_999, 0), time.Unix(1_000_000, 0)},
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2286, 12, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		if ka, kb := ddbhistory.SortKey(tt.a), ddbhistory.SortKey(tt.b); ka >= kb {
			t.Errorf("SortKey(%v) = %q >= SortKey(%v) = %q", tt.a, ka, tt.b, kb)
		}
	}
}
