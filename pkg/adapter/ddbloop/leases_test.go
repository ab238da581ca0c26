package ddbloop_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// layout2 makes s read a version 2 RATE of each loop, so that it keeps
// their leases in layout 2.
func layout2(t *testing.T, s *ddbloop.Store, loops ...string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	for _, id := range loops {
		if err := s.WriteRate(ctx, protocol.Rate{Loop: id, PerSecond: 1, WrittenAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if r, err := s.ReadRate(ctx, id); err != nil || r.LeaseLayout() != 2 {
			t.Fatalf("ReadRate(%s) = %+v, %v; want a RATE of layout 2", id, r, err)
		}
	}
}

// The lease contract holds in layout 2: the live counts per bucket count
// an instance once however often it refreshes, never a lapsed lease, and a
// loop whose id prefixes another's apart.
func TestPeersContractLayout2(t *testing.T) {
	storetest.TestPeers(t, func(t *testing.T) storetest.PeerStore {
		s := newStore(t)
		layout2(t, s, "a", "a#b", "c")
		return s
	})
}

// A closed lease leaves the live count at once.
func TestLayout2CloseLeavesTheCount(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	layout2(t, s, "orders")
	now := time.Now()
	for _, inst := range []string{"i-1", "i-2"} {
		if err := s.ReportPeer(ctx, protocol.Peer{Loop: "orders", Instance: inst, ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	closed := now.Add(time.Second)
	if err := s.ReportPeer(ctx, protocol.Peer{Loop: "orders", Instance: "i-1", ReportedAt: closed, ExpiresAt: closed}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.LivePeers(ctx, "orders", closed); err != nil || n != 1 {
		t.Errorf("LivePeers after i-1 closed = %d, %v; want 1", n, err)
	}
}

// TestRollingDeploy: during a rolling deploy a consumer of the previous
// release (layout 1: it never reads RATE's version) and one of this
// release (layout 2) share a loop. The controller reads both layouts and
// counts the old one in RATE's legacy_live; the new one adds it to its
// count and, while there is one, writes a layout 1 lease as well, so that
// each counts the other and neither takes the whole rate.
func TestRollingDeploy(t *testing.T) {
	testenv.AWSEndpoint(t)
	client, table := ddbtest.Table(t, "sluice-test")
	ctrl := ddbloop.New(client, table)
	ctx := context.Background()
	if err := ctrl.WriteParams(ctx, "orders", storetest.SampleParams("orders").Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	old := ddbstore.New(client, table)  // never reads a version 2 RATE
	next := ddbstore.New(client, table) // reads RATE before it reports
	now := time.Now()
	lease := func(s *ddbstore.Store, inst string, stored int64) {
		t.Helper()
		if err := s.ReportPeer(ctx, protocol.Peer{Loop: "orders", Instance: inst, Stored: stored, StartedAt: now, ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(version int64) {
		t.Helper()
		snaps, err := ctrl.LoadLoops(ctx)
		if err != nil || len(snaps) != 1 {
			t.Fatalf("LoadLoops = %+v, %v; want the loop", snaps, err)
		}
		got := map[string]int64{}
		for _, p := range snaps[0].Peers {
			got[p.Instance] = p.Stored
		}
		if len(got) != 2 || got["old-1"] != 5 || got["new-1"] != 7 {
			t.Errorf("the controller read leases %v; want old-1 (5) and new-1 (7), once each", got)
		}
		r := protocol.Rate{Loop: "orders", PerSecond: 100, WrittenAt: now, ExpiresAt: now.Add(time.Hour), Tick: version}
		if err := ctrl.CommitTick(ctx, loop.Commit{PrevVersion: version - 1, State: loop.State{Loop: "orders", Version: version, TickAt: now}, Rate: &r}); err != nil {
			t.Fatal(err)
		}
	}
	lease(old, "old-1", 5)
	if _, err := next.ReadRate(ctx, "orders"); err == nil {
		t.Fatal("RATE before the first tick; want none")
	}
	lease(next, "new-1", 7) // no RATE yet: layout 1, as the old release
	commit(1)
	r, err := next.ReadRate(ctx, "orders")
	if err != nil || r.LegacyLive != 2 || r.LeaseLayout() != 2 {
		// new-1 too: its only lease is in layout 1 yet (the safe side).
		t.Fatalf("RATE after the first tick = %+v, %v; want layout 2 with legacy_live 2 (old-1, new-1)", r, err)
	}
	lease(next, "new-1", 7) // layout 2, and layout 1 while old-1 runs
	commit(2)
	if r, _ := next.ReadRate(ctx, "orders"); r.LegacyLive != 1 {
		t.Errorf("RATE's legacy_live = %d; want 1: new-1's layout 1 lease is not a legacy instance", r.LegacyLive)
	}
	for name, s := range map[string]*ddbstore.Store{"old": old, "new": next} {
		if n, err := s.LivePeers(ctx, "orders", now); err != nil || n != 2 {
			t.Errorf("the %s consumer counts %d live, %v; want 2", name, n, err)
		}
	}
}

// A consumer's first refresh comes before its first RATE read: the store
// reads RATE first, so that an instance that starts writes no layout 1
// lease when the controller reads layout 2.
func TestFirstRefreshReadsTheLayout(t *testing.T) {
	testenv.AWSEndpoint(t)
	client, table := ddbtest.Table(t, "sluice-test")
	ctx := context.Background()
	now := time.Now()
	if err := ddbstore.New(client, table).WriteRate(ctx, protocol.Rate{Loop: "orders", PerSecond: 1, WrittenAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s := ddbstore.New(client, table)
	if err := s.ReportPeer(ctx, protocol.Peer{Loop: "orders", Instance: "i-1", StartedAt: now, ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	v1, err := s.Peers(ctx)
	if err != nil || len(v1["orders"]) != 0 {
		t.Errorf("layout 1 leases after a first refresh = %v, %v; want none (RATE says layout 2)", v1, err)
	}
	if v2, err := s.LoopPeers(ctx, "orders"); err != nil || len(v2) != 1 {
		t.Errorf("layout 2 leases = %v, %v; want i-1's", v2, err)
	}
}
