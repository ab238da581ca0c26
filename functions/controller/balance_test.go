package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

func TestHandleLogsBalancedLoop(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	if err := store.WriteParams(ctx, "fleet", map[string]any{
		"setpoint": 70.0, "kp": 2.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"nodes": map[string]any{
			"r1": map[string]any{"endpoint": "http://r1/", "metric": "replica-1"},
			"r2": map[string]any{"endpoint": "http://r2/", "metric": "replica-2"},
			"r3": map[string]any{"endpoint": "http://r3/", "metric": "replica-3"},
		},
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	h := &handler{
		history: &recordedHistory{},
		ticker: &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{cwmetric.Name: looptest.Metrics{Delay: time.Minute, Instances: map[string]float64{"replica-1": 80, "replica-2": 40}}},
			Now: func() time.Time { return now }},
		log:       slog.New(slog.NewJSONHandler(&buf, nil)),
		namespace: "SluiceTest",
		now:       func() time.Time { return now },
	}
	if _, err := h.handle(ctx, events.EventBridgeEvent{ID: "e1"}); err != nil {
		t.Fatalf("handle: %v", err)
	}
	var line struct {
		Weights      map[string]float64 `json:"weights"`
		Nodes        map[string]float64 `json:"nodes"`
		NodesMissing []string           `json:"nodes_missing"`
		MeasuredCPU  float64
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	if len(line.Weights) != 3 || !(line.Weights["http://r1/"] < line.Weights["http://r2/"]) {
		t.Errorf("weights = %v; want 3 by endpoint, the hot r1 below r2", line.Weights)
	}
	if len(line.Nodes) != 2 || len(line.NodesMissing) != 1 || line.NodesMissing[0] != "r3" {
		t.Errorf("nodes = %v, missing %v; want r1 and r2 fresh, r3 missing", line.Nodes, line.NodesMissing)
	}
	if line.MeasuredCPU != 80 {
		t.Errorf("MeasuredCPU = %v; want 80, the hottest node", line.MeasuredCPU)
	}
	r, err := store.ReadRate(ctx, "fleet")
	if err != nil || len(r.Weights) != 3 {
		t.Errorf("RATE = %+v, %v; want 3 weights", r, err)
	}
}
