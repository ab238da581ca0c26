package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/internal/testfile"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// recordedHistory records what the handler appends.
type recordedHistory struct {
	calls [][]loop.Report
	at    time.Time
}

func (r *recordedHistory) AppendReports(_ context.Context, t time.Time, reports []loop.Report) error {
	r.calls = append(r.calls, reports)
	r.at = t
	return nil
}

func loadEvent(t *testing.T) events.EventBridgeEvent {
	t.Helper()
	ev := testfile.JSON[events.EventBridgeEvent](t, "testdata/scheduled-event.json")
	if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" {
		t.Fatalf("testdata event = %+v; want a scheduled event", ev)
	}
	return ev
}

func TestHandleLogsOneEMFLinePerLoop(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	base := map[string]any{"setpoint": 70.0, "kp": 2.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "db"}}
	for _, id := range []string{"orders", "payments"} {
		if err := store.WriteParams(ctx, id, base); err != nil {
			t.Fatal(err)
		}
	}
	bad := map[string]any{"setpoint": 170.0, "kp": -1.0}
	if err := store.WriteParams(ctx, "broken", bad); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	hist := &recordedHistory{}
	h := &handler{
		history:   hist,
		ticker:    &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{cwmetric.Name: looptest.Metrics{Value: 55, Delay: time.Minute}}, Now: func() time.Time { return now }},
		log:       slog.New(slog.NewJSONHandler(&buf, nil)),
		namespace: "SluiceTest",
		now:       func() time.Time { return now },
	}
	res, err := h.handle(ctx, loadEvent(t))
	if err != nil {
		t.Fatalf("handle: %v", err)
	}
	if res.Loops != 3 || res.RateWrites != 2 || res.Refused != 1 || len(res.Applied) != 2 || res.Outcomes["no-params"] != 1 {
		t.Errorf("result = %+v; want 3 loops, 2 rates written, 1 refused", res)
	}

	if len(hist.calls) != 1 || len(hist.calls[0]) != 3 || !hist.at.Equal(now) {
		t.Errorf("history got %d calls (%v) at %v; want one with the 3 reports at %v", len(hist.calls), hist.calls, hist.at, now)
	}
	lines := map[string]map[string]any{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		lines[m["Loop"].(string)] = m
	}
	if len(lines) != 3 {
		t.Fatalf("log lines for %d loops; want 3", len(lines))
	}
	if r := lines["broken"]; r["params_status"] != "refused" || !strings.Contains(r["params_reason"].(string), "kp") || r["_aws"] != nil {
		t.Errorf("broken loop line = %v; want refused with a reason, and no metrics", r)
	}
	line := lines["orders"]
	aws, ok := line["_aws"].(map[string]any)
	if !ok {
		t.Fatalf("orders line has no _aws metadata: %v", line)
	}
	if ts, _ := aws["Timestamp"].(float64); int64(ts) != now.UnixMilli() {
		t.Errorf("EMF Timestamp = %v; want %d", aws["Timestamp"], now.UnixMilli())
	}
	cwm := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if cwm["Namespace"] != "SluiceTest" {
		t.Errorf("EMF namespace = %v", cwm["Namespace"])
	}
	names := map[string]bool{}
	for _, d := range cwm["Metrics"].([]any) {
		name := d.(map[string]any)["Name"].(string)
		names[name] = true
		if _, ok := line[name].(float64); !ok {
			t.Errorf("EMF metric %s has no numeric member in the line", name)
		}
	}
	for _, want := range []string{"MeasuredCPU", "Setpoint", "AllowedRate", "PTerm", "ITerm", "FFTerm", "Saturated", "Stale"} {
		if !names[want] {
			t.Errorf("EMF metrics %v lack %s", names, want)
		}
	}
	if line["MeasuredCPU"] != 55.0 || line["Setpoint"] != 70.0 {
		t.Errorf("MeasuredCPU, Setpoint = %v, %v; want 55, 70", line["MeasuredCPU"], line["Setpoint"])
	}
	if code, _ := line["reason"].(string); code == "" || line["Reason"] != code || line["ReasonTicks"] != 1.0 || line["reason_text"] == "" {
		t.Errorf("orders line: reason %v (%v), EMF Reason %v, ReasonTicks %v; want the tick's reason code, its sentence and ReasonTicks 1",
			line["reason"], line["reason_text"], line["Reason"], line["ReasonTicks"])
	}
}

func TestReadConfig(t *testing.T) {
	env := map[string]string{"SLUICE_TABLE": "t1", "SLUICE_PROMETHEUS_URL": "http://127.0.0.1:9090"}
	c := readConfig(func(k string) string { return env[k] })
	if c.Table != "t1" || c.PrometheusURL != "http://127.0.0.1:9090" || c.Namespace != "Sluice" {
		t.Errorf("readConfig = %+v", c)
	}
	if c := readConfig(func(string) string { return "" }); c.Table != "sluice" || !c.History {
		t.Errorf("default config = %+v; want table sluice with history", c)
	}
	if c := readConfig(func(k string) string { return map[string]string{"SLUICE_HISTORY": "off"}[k] }); c.History {
		t.Errorf("SLUICE_HISTORY=off: history still on")
	}
}

// fixedTicker returns the same reports at every tick.
type fixedTicker []loop.Report

func (f fixedTicker) Tick(context.Context) ([]loop.Report, error) { return f, nil }

// TestHandleOneFailedLoopDoesNotFailTheInvocation: a loop that failed is
// named in Problems and logged with LoopError = 1; the invocation succeeds
// while another loop applied, and fails when none did.
func TestHandleOneFailedLoopDoesNotFailTheInvocation(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	corrupt := loop.Report{Loop: "corrupt", Outcome: loop.OutcomeError, Err: errors.New("decode STATE: attribute version")}
	good := loop.Report{Loop: "good", Outcome: loop.OutcomeApplied, Tick: 3, OutputReport: loop.OutputReport{RateWritten: true, Rate: 50}, MeasurementReport: loop.MeasurementReport{Setpoint: 70, Measured: 60}}
	stale := loop.Report{Loop: "prom", Outcome: loop.OutcomeApplied, Tick: 2, Err: errors.New("prometheus query: HTTP 500"), MeasurementReport: loop.MeasurementReport{Stale: true}}
	noParams := loop.Report{Loop: "never-valid", Outcome: loop.OutcomeNoParams}
	var buf bytes.Buffer
	h := &handler{ticker: fixedTicker{corrupt, good, stale, noParams}, log: slog.New(slog.NewJSONHandler(&buf, nil)), namespace: "T", now: func() time.Time { return now }}
	res, err := h.handle(context.Background(), loadEvent(t))
	if err != nil {
		t.Fatalf("handle = %v; want no error while a loop applied", err)
	}
	if !strings.Contains(res.Problems["corrupt"], "decode STATE") || !strings.Contains(res.Problems["prom"], "HTTP 500") || res.Problems["good"] != "" || !strings.Contains(res.Problems["never-valid"], "PARAMS_STATUS") {
		t.Errorf("Problems = %v; want corrupt, prom and never-valid with their reasons", res.Problems)
	}
	if !strings.Contains(buf.String(), `"LoopError":1`) {
		t.Errorf("log %s; want the failed loop's LoopError metric", buf.String())
	}
	h.ticker = fixedTicker{corrupt, {Loop: "overlap", Outcome: loop.OutcomeNotDue}}
	if _, err := h.handle(context.Background(), loadEvent(t)); err != nil {
		t.Errorf("handle with a failed loop and one not due = %v; want no error", err)
	}
	h.ticker = fixedTicker{corrupt}
	if _, err := h.handle(context.Background(), loadEvent(t)); err == nil {
		t.Errorf("handle with every loop failed = nil; want an error")
	}
}
