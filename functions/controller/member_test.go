package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

func TestHandleLogsEachMemberWithItsShare(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	items := map[string]map[string]any{
		"db": {"setpoint": 70.0, "kp": 2.0, "ki": 0.05, "min_rate": 0.0, "max_rate": 1000.0,
			"metric_dimensions": map[string]any{"DBInstanceIdentifier": "db"}},
		"orders":  {"destination": "db", "weight": 2.0, "min_rate": 0.0, "max_rate": 1000.0},
		"billing": {"destination": "db", "weight": 1.0, "min_rate": 0.0, "max_rate": 1000.0},
	}
	for id, a := range items {
		if err := store.WriteParams(ctx, id, a); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	h := &handler{
		history:   &recordedHistory{},
		ticker:    &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{cwmetric.Name: looptest.Metrics{Value: 55, Delay: time.Minute}}, Now: func() time.Time { return now }},
		log:       slog.New(slog.NewJSONHandler(&buf, nil)),
		namespace: "SluiceTest",
		now:       func() time.Time { return now },
	}
	if _, err := h.handle(ctx, loadEvent(t)); err != nil {
		t.Fatalf("handle: %v", err)
	}
	lines := map[string]map[string]any{}
	for sc := bufio.NewScanner(&buf); sc.Scan(); {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines[m["Loop"].(string)] = m
	}
	o, b := lines["orders"], lines["billing"]
	if o["destination"] != "db" || o["weight"] != 2.0 || o["MemberShare"] == nil || b["MemberShare"] == nil {
		t.Fatalf("member lines %v, %v; want destination, weight and MemberShare", o, b)
	}
	if got := o["MemberShare"].(float64) + b["MemberShare"].(float64); got > 1+1e-9 || o["MemberShare"].(float64) <= b["MemberShare"].(float64) {
		t.Errorf("shares %v + %v; want at most 1, orders' above billing's", o["MemberShare"], b["MemberShare"])
	}
	defs := o["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"].([]any)
	if !slices.ContainsFunc(defs, func(d any) bool { return d.(map[string]any)["Name"] == "MemberShare" }) {
		t.Errorf("EMF metrics %v lack MemberShare", defs)
	}
}
