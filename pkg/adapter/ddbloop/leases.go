package ddbloop

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// leaseReads is how many loops' lease partitions LoadLoops reads at once.
const leaseReads = 16

// legacyCounts is what the last LoadLoops read of each loop's instances
// that keep only a version 1 lease: CommitTick writes how many are live at
// the tick into the loop's RATE (legacy_live), so that version 2
// consumers count them.
type legacyCounts struct {
	mu    sync.Mutex
	peers map[string][]protocol.Peer
}

func (c *legacyCounts) set(peers map[string][]protocol.Peer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peers = peers
}

// live counts loopID's legacy instances live at now.
func (c *legacyCounts) live(loopID string, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return protocol.LivePeers(c.peers[loopID], now)
}

// loadPeers gives every snapshot its loop's leases: the version 1 leases
// of every loop (one paginated query on the by-sk index) merged with each
// loop's version 2 leases (one query per loop, leaseReads at once). An
// instance with both (a version 2 consumer during a rolling deploy)
// counts once, by its latest report; the instances with only a version 1
// lease are the loop's legacy instances, whose live count at the tick
// CommitTick writes in RATE.
func (s *Store) loadPeers(ctx context.Context, snaps []loop.Snapshot) error {
	v1, err := s.Peers(ctx)
	if err != nil {
		return err
	}
	v2 := make([][]protocol.Peer, len(snaps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(leaseReads)
	for i := range snaps {
		g.Go(func() error {
			ps, err := s.LoopPeers(gctx, snaps[i].Loop)
			v2[i] = ps
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	legacy := make(map[string][]protocol.Peer)
	for i := range snaps {
		var only []protocol.Peer
		snaps[i].Peers, only = mergeLeases(v1[snaps[i].Loop], v2[i])
		if len(only) > 0 {
			legacy[snaps[i].Loop] = only
		}
	}
	s.legacy.set(legacy)
	return nil
}

// mergeLeases merges a loop's version 1 and version 2 leases by instance,
// keeping each instance's latest report (version 2 on a tie), and returns
// the instances that have only a version 1 lease.
func mergeLeases(v1, v2 []protocol.Peer) ([]protocol.Peer, []protocol.Peer) {
	if len(v1) == 0 {
		return v2, nil
	}
	at := make(map[string]int, len(v2))
	out := append([]protocol.Peer(nil), v2...)
	for i, p := range out {
		at[p.Instance] = i
	}
	var legacy []protocol.Peer
	for _, p := range v1 {
		i, ok := at[p.Instance]
		switch {
		case !ok:
			out = append(out, p)
			legacy = append(legacy, p)
		case p.ReportedAt.After(out[i].ReportedAt):
			out[i] = p
		}
	}
	return out, legacy
}
