package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// ReportPeer writes p's lease (the consumer's report, pkg/consume's
// PeerStore), replacing the instance's previous one. Leases that lapsed more
// than twice protocol.PeerRetention before p was reported are deleted, as
// DynamoDB's TTL would.
func (s *Store) ReportPeer(_ context.Context, p protocol.Peer) error {
	if p.Loop == "" || p.Instance == "" {
		return fmt.Errorf("memstore report peer: the lease needs a loop id and an instance id; got %+v", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers == nil {
		s.peers = make(map[string]map[string]protocol.Peer)
	}
	m := s.peers[p.Loop]
	if m == nil {
		m = make(map[string]protocol.Peer)
		s.peers[p.Loop] = m
	}
	for id, q := range m {
		if p.ReportedAt.Sub(q.ExpiresAt) > 2*protocol.PeerRetention {
			delete(m, id)
		}
	}
	m[p.Instance] = p
	return nil
}

// LivePeers counts the leases of loopID in force at now.
func (s *Store) LivePeers(_ context.Context, loopID string, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.peers[loopID] {
		if p.Live(now) {
			n++
		}
	}
	return n, nil
}

// peersOf returns loopID's leases sorted by instance; the caller holds mu.
func (s *Store) peersOf(loopID string) []protocol.Peer {
	m := s.peers[loopID]
	if len(m) == 0 {
		return nil
	}
	out := make([]protocol.Peer, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b protocol.Peer) int { return strings.Compare(a.Instance, b.Instance) })
	return out
}

// LoopPeers returns loopID's leases, sorted by instance (what
// ddbstore.Store.LoopPeers reads from DynamoDB).
func (s *Store) LoopPeers(_ context.Context, loopID string) ([]protocol.Peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peersOf(loopID), nil
}
