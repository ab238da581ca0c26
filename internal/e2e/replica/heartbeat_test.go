package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The exporter serves the newest reading while it is fresh and nothing once
// it is older than MaxAge (the series goes stale in Prometheus instead of
// freezing at an old lag).
func TestLagExporterServesFreshReadingsOnly(t *testing.T) {
	now := time.Unix(1000, 0)
	e := &LagExporter{Period: time.Hour, MaxAge: 3 * time.Second, Now: func() time.Time { return now },
		Read: func(context.Context) (LagReading, error) { return LagReading{Lag: 7.25, BehindMaster: 7}, nil }}
	scrape := func() string {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); strings.Contains(body, "\nsluice_replica_lag_seconds ") {
		t.Fatalf("a value before the first reading:\n%s", body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run reads once, then returns
	e.Run(ctx)
	body := scrape()
	for _, want := range []string{"sluice_replica_lag_seconds 7.25\n", "sluice_replica_seconds_behind_master 7\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	now = now.Add(4 * time.Second)
	if body := scrape(); strings.Contains(body, "\nsluice_replica_lag_seconds ") {
		t.Fatalf("a reading older than MaxAge is served:\n%s", body)
	}
}
