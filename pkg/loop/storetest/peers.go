package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// PeerStore is a loop store that also keeps the consumers' leases
// (pkg/consume's PeerStore).
type PeerStore interface {
	Store
	ReportPeer(ctx context.Context, p protocol.Peer) error
	LivePeers(ctx context.Context, loopID string, now time.Time) (int, error)
}

// TestPeers runs the contract of the consumers' leases against a fresh
// store from newStore: a lease replaces the instance's previous one, live
// leases count per loop (a loop id that prefixes another's counts apart),
// and a tick's LoadLoops returns every loop's leases, whose counts the
// controller turns into the processed rate kept in STATE.
func TestPeers(t *testing.T, newStore func(t *testing.T) PeerStore) {
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	s := newStore(t)
	for _, id := range []string{"a", "a#b"} {
		if err := s.WriteParams(ctx, id, SampleParams(id).Attrs(looptest.Sources())); err != nil {
			t.Fatal(err)
		}
	}
	lease := func(id, inst string, stored int64, expires time.Time) {
		t.Helper()
		p := protocol.Peer{Loop: id, Instance: inst, Stored: stored, StartedAt: at.Add(-time.Hour), ReportedAt: at, ExpiresAt: expires}
		if err := s.ReportPeer(ctx, p); err != nil {
			t.Fatalf("ReportPeer(%+v): %v", p, err)
		}
	}
	lease("a", "i-1", 10, at.Add(time.Minute))
	lease("a", "i-1", 1<<60, at.Add(time.Minute)) // replaces; counts beyond float64's integers
	lease("a", "i-2", 5, at.Add(-time.Second))    // lapsed
	lease("a", "i-3", 7, at.Add(time.Minute))
	lease("a#b", "i-4", 9, at.Add(time.Minute))
	batches := protocol.Peer{Loop: "a#b", Instance: "i-5", Stored: 30, StartedAt: at.Add(-time.Hour), ReportedAt: at, ExpiresAt: at.Add(time.Minute),
		Batches: 3, BatchMessages: 30, Working: 1234567891 * time.Nanosecond}
	if err := s.ReportPeer(ctx, batches); err != nil {
		t.Fatalf("ReportPeer(%+v): %v", batches, err)
	}
	for id, want := range map[string]int{"a": 2, "a#b": 2, "c": 0} {
		if n, err := s.LivePeers(ctx, id, at); err != nil || n != want {
			t.Errorf("LivePeers(%q) = %d, %v; want %d", id, n, err, want)
		}
	}
	snaps, err := s.LoadLoops(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int64{}
	for _, sn := range snaps {
		for _, p := range sn.Peers {
			if got[sn.Loop] == nil {
				got[sn.Loop] = map[string]int64{}
			}
			got[sn.Loop][p.Instance] = p.Stored
			if p.Loop != sn.Loop || !p.ReportedAt.Equal(at) || !p.StartedAt.Equal(at.Add(-time.Hour)) {
				t.Errorf("lease %+v of loop %s: fields not kept", p, sn.Loop)
			}
			if p.Instance == "i-5" && p.BatchCount() != batches.BatchCount() {
				t.Errorf("lease %+v: batch counts not kept; want %+v", p, batches.BatchCount())
			}
		}
	}
	if len(got["a"]) != 3 || got["a"]["i-1"] != 1<<60 || got["a#b"]["i-4"] != 9 || len(got["a#b"]) != 2 {
		t.Errorf("LoadLoops leases = %v; want a: i-1, i-2, i-3 and a#b: i-4, i-5", got)
	}
	stateRoundTrips(t, s, at)
}

// stateRoundTrips checks that what STATE keeps of the consumers' reports
// (Demand, and the event source mapping's MappingState) reads back as
// written.
func stateRoundTrips(t *testing.T, s PeerStore, at time.Time) {
	ctx := context.Background()
	m := loop.MappingState{UUID: "esm-1", Concurrency: 25, Target: 27, UpdatedAt: at, AttemptAt: at.Add(time.Minute), Error: "AccessDenied", ErrorAt: at.Add(time.Minute),
		BatchSeconds: 0.5, BatchSize: 9.5, Counts: map[string]protocol.BatchCount{"i-1": {Batches: 1 << 60, Messages: 7, Working: time.Hour}},
		Disabled: true, SwitchedAt: at.Add(2 * time.Minute)}
	st := loop.State{Loop: "a", Version: 1, TickAt: at, Mapping: m, Paused: true, PausedSince: at.Add(-time.Hour),
		Demand: loop.Demand{Stored: map[string]int64{"i-1": 1 << 60, "i-3": 7}, Processed: 412.5, Known: true, Live: 2, Limited: true}}
	if err := s.CommitTick(ctx, loop.Commit{PrevVersion: 0, State: st}); err != nil {
		t.Fatal(err)
	}
	back, err := s.ReadState(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	d := back.Demand
	if d.Processed != 412.5 || !d.Known || d.Live != 2 || !d.Limited || d.Stored["i-1"] != 1<<60 || d.Stored["i-3"] != 7 {
		t.Errorf("STATE demand = %+v; want %+v", d, st.Demand)
	}
	g := back.Mapping
	if g.UUID != "esm-1" || g.Concurrency != 25 || g.Target != 27 || !g.UpdatedAt.Equal(at) || !g.AttemptAt.Equal(m.AttemptAt) || g.Error != m.Error ||
		!g.ErrorAt.Equal(m.ErrorAt) || g.BatchSeconds != 0.5 || g.BatchSize != 9.5 || g.Counts["i-1"] != m.Counts["i-1"] ||
		!g.Disabled || !g.SwitchedAt.Equal(m.SwitchedAt) {
		t.Errorf("STATE mapping = %+v; want %+v", g, m)
	}
	if !back.Paused || !back.PausedSince.Equal(st.PausedSince) {
		t.Errorf("STATE paused = %v since %v; want true since %v", back.Paused, back.PausedSince, st.PausedSince)
	}
}
