package consume

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// TestBatchMetricsWriteEMF: one line that CloudWatch reads as metrics in
// the namespace, with the loop as dimension; an unlimited rate is -1 (JSON
// has no infinity).
func TestBatchMetricsWriteEMF(t *testing.T) {
	st := &Stats{}
	st.setAllowed(Allowed{Total: math.Inf(1), Share: math.Inf(1)})
	var buf bytes.Buffer
	m := BatchMetrics{Loop: "orders", Consumed: 3, Report: Report{Stored: make([]Message, 2), Deferred: make([]Message, 1)},
		Paced: 1500 * time.Millisecond, Stats: st}
	m.Report.Working = 250 * time.Millisecond
	if err := m.WriteEMF(&buf, ""); err != nil {
		t.Fatal(err)
	}
	var line struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
			}
		} `json:"_aws"`
		Loop                             string
		Stored, Failed, Released         int
		PacedSeconds, AllowedRate, Share float64
		WorkingSeconds                   float64
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("WriteEMF wrote %q: %v", buf.String(), err)
	}
	cw := line.AWS.CloudWatchMetrics
	if len(cw) != 1 || cw[0].Namespace != DefaultNamespace || cw[0].Dimensions[0][0] != "Loop" || line.Loop != "orders" {
		t.Errorf("EMF metadata %+v loop %q; want %s by Loop, orders", cw, line.Loop, DefaultNamespace)
	}
	if line.Stored != 2 || line.Failed != 1 || line.Released != 1 || line.PacedSeconds != 1.5 || line.AllowedRate != -1 || line.WorkingSeconds != 0.25 {
		t.Errorf("EMF values %+v; want stored 2, failed 1, released 1, paced 1.5, allowed -1, working 0.25", line)
	}
}
