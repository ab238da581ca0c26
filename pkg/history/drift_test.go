package history

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// A tick whose STATE says the model drifted marks its point, on the wire
// as model_drift, and only then.
func TestPointModelDrift(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p, ok := FromReport(at, loop.Report{Outcome: loop.OutcomeApplied, Measured: 60, ModelDrift: true})
	if !ok || !p.ModelDrift {
		t.Fatalf("FromReport with model drift = %+v, %v; want ModelDrift", p, ok)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Point
	if err := json.Unmarshal(b, &back); err != nil || !back.ModelDrift || !strings.Contains(string(b), `"model_drift":true`) {
		t.Fatalf("round trip of %s = %+v, %v; want model_drift true", b, back, err)
	}
	p.ModelDrift = false
	if b, _ := json.Marshal(p); strings.Contains(string(b), "model_drift") {
		t.Fatalf("point without drift = %s; want no model_drift", b)
	}
}
