package ddbhistory_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// The adapters serve the dashboard's readers.
var (
	_ dashboard.HistoryReader = (*ddbhistory.Store)(nil)
	_ dashboard.LoopLister    = (*ddbhistory.Store)(nil)
	_ dashboard.HistoryReader = (*ddbhistory.Memory)(nil)
)

// historyStore is what the contract suite exercises: the reader plus Append.
type historyStore interface {
	dashboard.HistoryReader
	Append(ctx context.Context, loopID string, p history.Point) error
	AppendReports(ctx context.Context, t time.Time, reports []loop.Report) error
}

// newTable creates a fresh table (pk, sk) on the local AWS endpoint.
func newTable(t *testing.T) (*dynamodb.Client, string) {
	t.Helper()
	testenv.AWSEndpoint(t)
	return ddbtest.Table(t, "sluice-hist")
}

func point(t0 time.Time, k int) history.Point {
	p := history.Point{
		T: t0.Add(time.Duration(k) * time.Minute), Setpoint: 70, Measured: 60 + float64(k),
		Rate: 1000 + float64(k), Consumed: 990 + float64(k), P: float64(k), I: -float64(k), FF: 1200,
		Saturated: k%3 == 0, Stale: k%4 == 0, Depth: 5000 - float64(k), Mode: "auto", ModelDrift: k%5 == 1,
	}
	if k%2 == 0 {
		p.ConsumedSmoothing = loop.ProcessedSmoothing
	}
	if p.Stale {
		p.Measured = math.NaN()
	}
	if k%2 == 1 {
		p.Limiting = "lag"
		p.Signals = []history.SignalPoint{{Name: "cpu", Unit: "%", Setpoint: 70, Measured: p.Measured}, {Name: "lag", Unit: "s", Setpoint: 10, Measured: math.NaN()}}
	}
	return p
}

func same(a, b history.Point) bool {
	eq := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	return a.T.Equal(b.T) && eq(a.Setpoint, b.Setpoint) && eq(a.Measured, b.Measured) && eq(a.Rate, b.Rate) &&
		eq(a.Consumed, b.Consumed) && a.ConsumedSmoothing == b.ConsumedSmoothing && eq(a.P, b.P) && eq(a.I, b.I) && eq(a.FF, b.FF) &&
		a.Saturated == b.Saturated && a.Stale == b.Stale && eq(a.Depth, b.Depth) && a.Mode == b.Mode &&
		a.ModelDrift == b.ModelDrift && a.Limiting == b.Limiting && len(a.Signals) == len(b.Signals) &&
		!slices.ContainsFunc(a.Signals, func(s history.SignalPoint) bool {
			i := slices.IndexFunc(b.Signals, func(t history.SignalPoint) bool { return t.Name == s.Name })
			return i < 0 || b.Signals[i].Unit != s.Unit || !eq(b.Signals[i].Setpoint, s.Setpoint) || !eq(b.Signals[i].Measured, s.Measured)
		})
}

// contract is the suite every historyStore implementation passes.
func contract(t *testing.T, newHistory func(t *testing.T) historyStore) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)

	t.Run("Last returns the newest points oldest first", func(t *testing.T) {
		h := newHistory(t)
		for k := range 10 {
			if err := h.Append(ctx, "a", point(t0, k)); err != nil {
				t.Fatalf("Append(%d) = %v", k, err)
			}
		}
		_ = h.Append(ctx, "b", point(t0, 100))
		got, err := h.Last(ctx, "a", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("Last(a, 3) returned %d points; want 3", len(got))
		}
		for i, k := range []int{7, 8, 9} {
			if want := point(t0, k); !same(got[i], want) {
				t.Errorf("Last(a, 3)[%d] = %+v; want %+v", i, got[i], want)
			}
		}
	})
	t.Run("Since is exclusive and bounded", func(t *testing.T) {
		h := newHistory(t)
		for k := range 10 {
			_ = h.Append(ctx, "a", point(t0, k))
		}
		got, err := h.Since(ctx, "a", point(t0, 4).T, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !same(got[0], point(t0, 5)) || !same(got[1], point(t0, 6)) {
			t.Fatalf("Since(t4, 2) = %+v; want points 5 and 6", got)
		}
		all, _ := h.Since(ctx, "a", time.Time{}, 0)
		if len(all) != 10 {
			t.Errorf("Since(zero, 0) returned %d points; want 10", len(all))
		}
		none, _ := h.Since(ctx, "a", point(t0, 9).T, 5)
		if len(none) != 0 {
			t.Errorf("Since(last) returned %d points; want 0", len(none))
		}
	})
	t.Run("same tick overwrites", func(t *testing.T) {
		h := newHistory(t)
		p := point(t0, 1)
		_ = h.Append(ctx, "a", p)
		p.Rate = 42
		_ = h.Append(ctx, "a", p)
		got, _ := h.Last(ctx, "a", 10)
		if len(got) != 1 || got[0].Rate != 42 {
			t.Fatalf("after two appends at one tick Last = %+v; want one point with rate 42", got)
		}
	})
	t.Run("AppendReports records applied ticks only", func(t *testing.T) {
		h := newHistory(t)
		reports := []loop.Report{
			{Loop: "a", Outcome: loop.OutcomeApplied, Mode: loop.ModeAuto, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 65}, OutputReport: loop.OutputReport{Rate: 900, P: 5, I: 30, FF: 865, Saturated: true}},
			{Loop: "b", Outcome: loop.OutcomeApplied, Mode: loop.ModeShadow, MeasurementReport: loop.MeasurementReport{Setpoint: 60, Measured: math.NaN(), Stale: true}, OutputReport: loop.OutputReport{Rate: 200}},
			{Loop: "c", Outcome: loop.OutcomeLost, MeasurementReport: loop.MeasurementReport{Setpoint: 60, Measured: 50}, OutputReport: loop.OutputReport{Rate: 300}},
			{Loop: "d", Outcome: loop.OutcomeError, MeasurementReport: loop.MeasurementReport{Measured: math.NaN()}},
		}
		for i := range 30 { // more than one BatchWriteItem
			reports = append(reports, loop.Report{Loop: fmt.Sprintf("bulk-%02d", i), Outcome: loop.OutcomeApplied, MeasurementReport: loop.MeasurementReport{Setpoint: 50, Measured: 50}, OutputReport: loop.OutputReport{Rate: float64(i)}})
		}
		if err := h.AppendReports(ctx, t0, reports); err != nil {
			t.Fatalf("AppendReports = %v", err)
		}
		nan := math.NaN()
		for _, tt := range []struct {
			loop string
			want []history.Point
		}{
			{"a", []history.Point{{T: t0, Setpoint: 70, Measured: 65, Rate: 900, Consumed: nan, P: 5, I: 30, FF: 865, Saturated: true, Depth: nan, Mode: "auto"}}},
			{"b", []history.Point{{T: t0, Setpoint: 60, Measured: nan, Rate: 200, Consumed: nan, P: nan, I: nan, FF: nan, Stale: true, Depth: nan, Mode: "shadow"}}},
			{"c", nil},
			{"d", nil},
			{"bulk-29", []history.Point{{T: t0, Setpoint: 50, Measured: 50, Rate: 29, Consumed: nan, Depth: nan}}},
		} {
			got, err := h.Last(ctx, tt.loop, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("Last(%s) = %d points; want %d", tt.loop, len(got), len(tt.want))
				continue
			}
			for i := range got {
				if !same(got[i], tt.want[i]) {
					t.Errorf("Last(%s)[%d] = %+v; want %+v", tt.loop, i, got[i], tt.want[i])
				}
			}
		}
	})
	t.Run("unknown loop is empty", func(t *testing.T) {
		h := newHistory(t)
		got, err := h.Last(ctx, "nope", 5)
		if err != nil || len(got) != 0 {
			t.Fatalf("Last(nope) = %v, %v; want empty, nil", got, err)
		}
	})
}

func TestMemoryContract(t *testing.T) {
	contract(t, func(t *testing.T) historyStore { return ddbhistory.NewMemory(0) })
}

func TestMemoryCapacity(t *testing.T) {
	ctx := context.Background()
	m := ddbhistory.NewMemory(5)
	t0 := time.Unix(0, 0)
	for k := range 12 {
		_ = m.Append(ctx, "a", point(t0, k))
	}
	got, _ := m.Last(ctx, "a", 0)
	if len(got) != 5 || !same(got[0], point(t0, 7)) {
		t.Fatalf("Memory(5) after 12 appends holds %d points starting %v; want 5 starting at point 7", len(got), got[0].T)
	}
}

func TestStoreContract(t *testing.T) {
	contract(t, func(t *testing.T) historyStore {
		c, table := newTable(t)
		return ddbhistory.New(c, table)
	})
}

func TestStoreItemTTLAndLoops(t *testing.T) {
	ctx := context.Background()
	c, table := newTable(t)
	s := ddbhistory.New(c, table, ddbhistory.WithRetention(48*time.Hour))
	t0 := time.Date(2026, 11, 29, 22, 0, 0, 0, time.UTC)
	if err := s.Append(ctx, "orders", point(t0, 0)); err != nil {
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
