package loop

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

func TestMeasureDemand(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	live := now.Add(10 * time.Second)
	peer := func(id string, stored int64, started time.Time, expires time.Time) protocol.Peer {
		return protocol.Peer{Loop: "l", Instance: id, Stored: stored, StartedAt: started, ReportedAt: now, ExpiresAt: expires}
	}
	old := t0.Add(-time.Hour)
	for _, tc := range []struct {
		name      string
		peers     []protocol.Peer
		prev      map[string]int64
		prevTick  time.Time
		want      float64
		wantKnown bool
		wantLive  int
	}{
		{name: "increase of every count", peers: []protocol.Peer{peer("a", 700, old, live), peer("b", 1300, old, live)},
			prev: map[string]int64{"a": 100, "b": 100}, prevTick: t0, want: 30, wantKnown: true, wantLive: 2},
		{name: "a peer started since the last tick counts whole", peers: []protocol.Peer{peer("a", 700, old, live), peer("c", 600, t0.Add(time.Second), live)},
			prev: map[string]int64{"a": 100}, prevTick: t0, want: 20, wantKnown: true, wantLive: 2},
		{name: "a lapsed lease still counts its last report", peers: []protocol.Peer{peer("a", 700, old, now.Add(-time.Minute))},
			prev: map[string]int64{"a": 100}, prevTick: t0, want: 10, wantKnown: true, wantLive: 0},
		{name: "a lease lapsed beyond retention is ignored", peers: []protocol.Peer{peer("a", 700, old, now.Add(-protocol.PeerRetention-time.Second))},
			prev: map[string]int64{"a": 100}, prevTick: t0, want: 0, wantKnown: true, wantLive: 0},
		{name: "a count below its baseline counts from zero", peers: []protocol.Peer{peer("a", 60, old, live)},
			prev: map[string]int64{"a": 1000}, prevTick: t0, want: 1, wantKnown: true, wantLive: 1},
		{name: "after a gap the counts cover the whole gap", peers: []protocol.Peer{peer("a", 6100, old, live)},
			prev: map[string]int64{"a": 100}, prevTick: now.Add(-10 * time.Minute), want: 10, wantKnown: true, wantLive: 1},
		{name: "all peers gone: nothing taken", prev: map[string]int64{"a": 100}, prevTick: t0, want: 0, wantKnown: true},
		{name: "an old peer without baseline makes it unknown", peers: []protocol.Peer{peer("a", 700, old, live)}, prevTick: t0, wantLive: 1},
		{name: "first tick: unknown", peers: []protocol.Peer{peer("a", 700, old, live)}, wantLive: 1},
		{name: "no consumer reports: unknown", prevTick: t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := measureDemand(tc.peers, Demand{Stored: tc.prev}, tc.prevTick, now)
			if d.Known != tc.wantKnown || d.Processed != tc.want || d.Live != tc.wantLive {
				t.Errorf("measureDemand = processed %v known %v live %d; want %v %v %d", d.Processed, d.Known, d.Live, tc.want, tc.wantKnown, tc.wantLive)
			}
			for _, p := range tc.peers {
				if _, ok := d.Stored[p.Instance]; !ok && now.Sub(p.ExpiresAt) <= protocol.PeerRetention {
					t.Errorf("baseline of %s missing from %v", p.Instance, d.Stored)
				}
			}
		})
	}
}

func TestSmoothProcessedEvensOutLumps(t *testing.T) {
	// Lumps on 5-second ticks: 6 then 3.8 messages/s, and so on, around
	// a rate of about 4.9; a tick of a minute follows the newest figure.
	d := Demand{}
	var lo, hi float64 = math.Inf(1), math.Inf(-1)
	for k := range 40 {
		raw := 6.0
		if k%2 == 1 {
			raw = 3.8
		}
		d = Demand{Processed: smoothProcessed(raw, d, 5*time.Second), Known: true}
		if k >= 20 {
			lo, hi = math.Min(lo, d.Processed), math.Max(hi, d.Processed)
		}
	}
	if lo < 4.6 || hi > 5.2 {
		t.Errorf("smoothed figure over 5-s ticks within [%.2f, %.2f]; want within [4.6, 5.2] (the lumps' mean 4.9)", lo, hi)
	}
	if got := smoothProcessed(400, Demand{Processed: 1200, Known: true}, time.Minute); math.Abs(got-(1200*math.Exp(-2)+400*(1-math.Exp(-2)))) > 1e-9 || got > 520 {
		t.Errorf("smoothProcessed(400 after 1200, 1 min) = %v; want mostly the newest figure", got)
	}
	if got := smoothProcessed(400, Demand{}, time.Minute); got != 400 {
		t.Errorf("smoothProcessed without a previous figure = %v; want 400", got)
	}
}

// A lease's count is as of its report, not of the tick: a consumer that
// refreshes its lease every 2 s covers up to 2 s more or less than a
// 60-s tick, which read up to 3 % off the rate it stored (and a model's
// prediction from that rate jittered with it). With the report times kept,
// the count is rescaled to the tick; a lease that was not refreshed
// through the interval is taken as it is.
func TestMeasureDemandCountsAsOfTheReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	old := t0.Add(-time.Hour)
	peer := func(id string, stored int64, reported time.Time) protocol.Peer {
		return protocol.Peer{Loop: "l", Instance: id, Stored: stored, StartedAt: old, ReportedAt: reported, ExpiresAt: now.Add(10 * time.Second)}
	}
	prev := Demand{
		Stored:     map[string]int64{"a": 1000, "b": 1000, "c": 1000},
		ReportedAt: map[string]time.Time{"a": t0.Add(-1900 * time.Millisecond), "b": t0.Add(-100 * time.Millisecond), "c": t0.Add(-2 * time.Second)},
	}
	for _, tc := range []struct {
		name  string
		prev  Demand
		peers []protocol.Peer
		want  float64
	}{
		// 10 msg/s each: a over 61.8 s, b over 58.2 s.
		{"each count over its own report interval", prev, []protocol.Peer{peer("a", 1618, now.Add(-100*time.Millisecond)), peer("b", 1582, now.Add(-1900*time.Millisecond))}, 20},
		// c stopped reporting 40 s into the tick: what it stored counts once, not rescaled.
		{"a lease not refreshed through the tick counts as it is", prev, []protocol.Peer{peer("c", 1420, t0.Add(40*time.Second))}, 7},
		{"a baseline without report times counts as it is", Demand{Stored: map[string]int64{"a": 1000}}, []protocol.Peer{peer("a", 1618, now.Add(-100*time.Millisecond))}, 618.0 / 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := measureDemand(tc.peers, tc.prev, t0, now)
			if !d.Known || math.Abs(d.Processed-tc.want) > 1e-9 {
				t.Errorf("processed %v (known %v); want %v", d.Processed, d.Known, tc.want)
			}
			for _, x := range tc.peers {
				if !d.ReportedAt[x.Instance].Equal(x.ReportedAt) {
					t.Errorf("baseline report time of %s = %v; want %v", x.Instance, d.ReportedAt[x.Instance], x.ReportedAt)
				}
			}
		})
	}
}

// TestDemandBaselinesBounded: with consumer instances that come and go
// (100 new ones a tick, each living one tick), STATE keeps the baselines
// of about the last tick's instances, not of every instance seen within
// PeerRetention (ten ticks' worth), and never more than MaxBaselines.
func TestDemandBaselinesBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var peers []protocol.Peer
	var prev *State
	for tick := range 30 {
		now := t0.Add(time.Duration(tick) * time.Minute)
		for i := range 100 {
			peers = append(peers, protocol.Peer{Loop: "l", Instance: fmt.Sprintf("t%d-%d", tick, i), Stored: 60, StartedAt: now.Add(-time.Minute),
				ReportedAt: now.Add(-time.Second), ExpiresAt: now.Add(-time.Second)})
		}
		var kept []protocol.Peer // what the store still holds: PeerRetention
		for _, p := range peers {
			if now.Sub(p.ExpiresAt) <= protocol.PeerRetention {
				kept = append(kept, p)
			}
		}
		peers = kept
		var in control.Input
		var r Report
		d := observeDemand(Snapshot{Loop: "l", Peers: peers}, prev, now, &in, &r)
		prev = &State{Loop: "l", TickAt: now, Demand: d}
		if tick > 2 && !d.Known {
			t.Fatalf("tick %d: processed rate unknown; want it known from the baselines", tick)
		}
	}
	if n := len(prev.Demand.Stored); n > 300 {
		t.Errorf("STATE keeps %d baselines after 30 ticks of 100 short-lived instances; want those of the last ticks only (<= 300)", n)
	}
	many := make(map[string]int64, MaxBaselines+10)
	at := make(map[string]time.Time, MaxBaselines+10)
	for i := range MaxBaselines + 10 {
		many[fmt.Sprint(i)], at[fmt.Sprint(i)] = 1, t0.Add(time.Duration(i)*time.Millisecond)
	}
	if got, _ := capBaselines(many, at); len(got) != MaxBaselines || got["0"] != 0 || got[fmt.Sprint(MaxBaselines+9)] != 1 {
		t.Errorf("capBaselines kept %d (oldest kept: %v); want the %d most recent", len(got), got["0"] != 0, MaxBaselines)
	}
}
