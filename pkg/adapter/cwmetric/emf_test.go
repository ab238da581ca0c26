package cwmetric_test

import (
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/loop"
)

func attrMap(attrs []slog.Attr) map[string]slog.Value {
	m := make(map[string]slog.Value, len(attrs))
	for _, a := range attrs {
		m[a.Key] = a.Value
	}
	return m
}

func TestEMFAttrsProcessedRate(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := loop.Report{Loop: "orders", MeasurementReport: loop.MeasurementReport{Measured: 30, Setpoint: 70}, OutputReport: loop.OutputReport{Rate: 1200}, DemandReport: loop.DemandReport{Processed: 400, ProcessedKnown: true, LivePeers: 3, DemandLimited: true}}
	m := attrMap(cwmetric.EMFAttrs("Sluice", r, at))
	if m["ProcessedRate"].Float64() != 400 || m["LiveConsumers"].Float64() != 3 || m["DemandLimited"].Float64() != 1 {
		t.Errorf("EMF attrs = %v; want ProcessedRate 400, LiveConsumers 3, DemandLimited 1", m)
	}
	r.ProcessedKnown, r.Measured = false, math.NaN()
	m = attrMap(cwmetric.EMFAttrs("Sluice", r, at))
	if _, ok := m["ProcessedRate"]; ok {
		t.Errorf("EMF attrs = %v; want no ProcessedRate when the consumers did not report", m)
	}
	if _, ok := m["MeasuredCPU"]; ok {
		t.Errorf("EMF attrs = %v; want no MeasuredCPU when missing", m)
	}
}

func TestEMFAttrsReason(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := loop.Report{Loop: "orders", Reason: &loop.Reason{Code: loop.ReasonMinRate, Text: "min_rate: at 10 msg/s"}}
	m := attrMap(cwmetric.EMFAttrs("Sluice", r, at))
	if m["ReasonTicks"].Float64() != 1 || m[cwmetric.EMFReasonDimension].String() != "min_rate" {
		t.Fatalf("EMF attrs = %v; want ReasonTicks 1 with Reason min_rate", m)
	}
	dirs := m["_aws"].Any().(map[string]any)["CloudWatchMetrics"].([]any)
	if len(dirs) != 2 {
		t.Fatalf("EMF directives = %v; want the loop's metrics and ReasonTicks", dirs)
	}
	dims := dirs[1].(map[string]any)["Dimensions"].([]any)[0].([]any)
	if len(dims) != 2 || dims[0] != cwmetric.EMFDimension || dims[1] != cwmetric.EMFReasonDimension {
		t.Errorf("ReasonTicks dimensions = %v; want [Loop Reason]", dims)
	}
	r.Reason = nil
	if _, ok := attrMap(cwmetric.EMFAttrs("Sluice", r, at))["ReasonTicks"]; ok {
		t.Errorf("EMF attrs have ReasonTicks without a reason")
	}
}
