package loop

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
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

// The tick reports what the live leases say of the consumers' inner loops:
// the mean latency and reference of those that carry them (the dashboard
// charts them), and the rate withheld.
func TestObserveDemandReportsTheInnerLoop(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	peer := func(id string, lat, ref time.Duration, expires time.Time) protocol.Peer {
		return protocol.Peer{Loop: "l", Instance: id, Stored: 700, Withheld: 1200, StartedAt: t0.Add(-time.Hour),
			ReportedAt: now, ExpiresAt: expires, InnerLatency: lat, InnerReference: ref}
	}
	prev := &State{TickAt: t0, Demand: Demand{Stored: map[string]int64{"a": 100, "b": 100, "c": 100, "d": 100},
		Withheld: map[string]int64{"a": 600, "b": 600}, Known: true}}
	peers := []protocol.Peer{
		peer("a", 30*time.Millisecond, 20*time.Millisecond, now.Add(10*time.Second)),
		peer("b", 10*time.Millisecond, 0, now.Add(10*time.Second)),                    // not learned yet
		peer("c", 0, 0, now.Add(10*time.Second)),                                      // no inner loop
		peer("d", 90*time.Millisecond, 90*time.Millisecond, now.Add(-10*time.Second)), // lapsed
	}
	var r Report
	var in control.Input
	d := observeDemand(Snapshot{Peers: peers}, prev, now, &in, &r)
	if r.InnerLatency != 20*time.Millisecond || r.InnerReference != 20*time.Millisecond {
		t.Errorf("inner latency %v, reference %v; want the live leases' means 20ms and 20ms", r.InnerLatency, r.InnerReference)
	}
	if r.Withheld <= 0 || r.Withheld != d.WithheldRate {
		t.Errorf("withheld %v msg/s; want the tick's withheld rate %v", r.Withheld, d.WithheldRate)
	}
}
