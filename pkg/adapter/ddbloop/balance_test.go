package ddbloop_test

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// TestBalancedLoopOnDynamoDB ticks a loop with nodes over DynamoDB: the
// nodes attribute (a map of maps) survives the item, RATE carries the
// weights keyed by endpoint, STATE the balancer's memory, and the next tick
// continues from it.
func TestBalancedLoopOnDynamoDB(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	attrs := map[string]any{
		"setpoint": 70.0, "kp": 2.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "primary"},
		"nodes": map[string]any{
			"r1": map[string]any{"endpoint": "http://r1:8080/ingest", "metric": "replica-1"},
			"r2": map[string]any{"endpoint": "http://r2:8080/ingest", "metric": "DBInstanceIdentifier=replica-2"},
		},
		"regulate": "mean", "balance_kp": 0.2,
	}
	if err := s.WriteParams(ctx, "fleet", attrs); err != nil {
		t.Fatal(err)
	}
	raw, err := s.ReadParams(ctx, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(raw, attrs) {
		t.Fatalf("ReadParams = %v; want %v", raw, attrs)
	}
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	tk := &loop.Ticker{Sources: looptest.Sources(), Store: s, Metrics: map[string]metric.Reader{cwmetric.Name: looptest.Metrics{Instances: map[string]float64{"replica-1": 80, "replica-2": 40}}},
		Now: func() time.Time { return now }}
	var weights []map[string]float64
	for i := range 2 {
		reports, err := tk.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(reports) != 1 || reports[0].Outcome != loop.OutcomeApplied {
			t.Fatalf("tick %d: reports %+v; want applied", i, reports)
		}
		if reports[0].Measured != 60 {
			t.Errorf("tick %d: measured %v; want the mean 60 of the nodes", i, reports[0].Measured)
		}
		r, err := s.ReadRate(ctx, "fleet")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Weights, reports[0].Weights) || len(r.Weights) != 2 {
			t.Fatalf("tick %d: RATE weights %v; want the tick's %v", i, r.Weights, reports[0].Weights)
		}
		weights = append(weights, r.Weights)
		st, err := s.ReadState(ctx, "fleet")
		if err != nil {
			t.Fatal(err)
		}
		if st.Balance.Ticks != int64(i+1) || len(st.Balance.Nodes) != 2 || st.Balance.Nodes["r1"].Weight != r.Weights["http://r1:8080/ingest"] {
			t.Errorf("tick %d: STATE balance %+v; want %d ticks and RATE's weights", i, st.Balance, i+1)
		}
		now = now.Add(time.Minute)
	}
	// The hot replica loses weight at each tick, from where STATE left it.
	w := func(i int) float64 { return weights[i]["http://r1:8080/ingest"] }
	if !(w(0) < 0.5 && w(1) < w(0)) || math.Abs(w(1)+weights[1]["http://r2:8080/ingest"]-1) > 1e-9 {
		t.Errorf("weights of the hot replica by tick: %v, %v; want below 0.5 and falling, summing to 1 with the other", w(0), w(1))
	}
}
