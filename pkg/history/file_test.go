package history_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
)

func filePoints(n int) []history.Point {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var pts []history.Point
	for k := range n {
		pts = append(pts, history.Point{T: t0.Add(time.Duration(k) * time.Minute), Setpoint: 60, Measured: 50 + float64(k),
			Rate: 100, Consumed: 90, Depth: math.NaN(), P: 1, I: 2, FF: math.NaN(), Mode: "auto"})
	}
	return pts
}

// A file round-trips with its timing and PARAMS; a bare array of points
// reads too; since keeps the newest point and the span before it.
func TestFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	f := history.File{Loop: "orders", TickS: 60, MetricPeriodS: 60, PipelineDelayS: 150,
		Params: map[string]any{"kp": 0.5}, Points: filePoints(10)}
	path := filepath.Join(dir, "h.json")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := history.ReadFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Loop != "orders" || got.PipelineDelayS != 150 || got.Params["kp"] != 0.5 || len(got.Points) != 10 || got.Points[9].Measured != 59 {
		t.Fatalf("read back %+v", got)
	}
	if kept, _ := history.ReadFile(path, 3*time.Minute); len(kept.Points) != 4 || kept.Points[0].Measured != 56 {
		t.Errorf("since 3m kept %d points; want 4 (the newest and the 3 minutes before it)", len(kept.Points))
	}
	bare := filepath.Join(dir, "bare.json")
	if err := os.WriteFile(bare, []byte(`[{"t":0,"measured":40,"consumed":5}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := history.ReadFile(bare, 0); err != nil || len(b.Points) != 1 || b.Points[0].Measured != 40 || b.Loop != "" {
		t.Errorf("bare array: %+v, %v", b, err)
	}
	junk := filepath.Join(dir, "junk.json")
	_ = os.WriteFile(junk, []byte(`{"points": 3}`), 0o644)
	if _, err := history.ReadFile(junk, 0); err == nil {
		t.Error("a file without points: no error")
	}
	if _, err := history.ReadFile(filepath.Join(dir, "none.json"), 0); err == nil {
		t.Error("a missing file: no error")
	}
}

func ExampleFile() {
	path := filepath.Join(os.TempDir(), "sluice-history-example.json")
	defer os.Remove(path)
	f := history.File{Loop: "orders", TickS: 60, MetricPeriodS: 60, PipelineDelayS: 150, Points: filePoints(30)}
	if err := f.WriteFile(path); err != nil {
		fmt.Println(err)
		return
	}
	last, err := history.ReadFile(path, 10*time.Minute) // the last 10 minutes
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(last.Loop, len(last.Points), last.Points[0].Measured)
	// Output: orders 11 69
}
