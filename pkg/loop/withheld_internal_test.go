package loop

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

func TestMeasureWithheld(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	peer := func(id string, stored, withheld int64) protocol.Peer {
		return protocol.Peer{Loop: "l", Instance: id, Stored: stored, Withheld: withheld, StartedAt: t0.Add(-time.Hour),
			ReportedAt: now, ExpiresAt: now.Add(10 * time.Second)}
	}
	prev := Demand{Stored: map[string]int64{"a": 100, "b": 100}, Withheld: map[string]int64{"a": 600}, Known: true}
	d := measureDemand([]protocol.Peer{peer("a", 700, 1800), peer("b", 700, 600)}, prev, t0, now)
	// a withheld 1200 since its baseline, b 600 since it withheld nothing
	// at the previous tick: 1800 in 60 s.
	if d.WithheldRate != 30 {
		t.Errorf("WithheldRate = %v; want 30 messages/s", d.WithheldRate)
	}
	if d.Withheld["a"] != 1800 || d.Withheld["b"] != 600 {
		t.Errorf("baselines %v; want a 1800, b 600", d.Withheld)
	}
	d = measureDemand([]protocol.Peer{peer("a", 1300, 1800), peer("b", 1300, 600)}, d, now, now.Add(time.Minute))
	if d.WithheldRate != 0 {
		t.Errorf("WithheldRate = %v once nothing more was withheld; want 0", d.WithheldRate)
	}
}
