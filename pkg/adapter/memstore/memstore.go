// Package memstore keeps the items of every loop (PARAMS, PARAMS_STATUS,
// STATE, RATE) in memory, with the same semantics as the DynamoDB store,
// conditional commits included: for tests, the embedded demo and the
// dashboard demo.
package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Store is an in-memory store of loop items. Its zero value is not usable:
// call New. It is safe for concurrent use.
type Store struct {
	mu     sync.Mutex
	params map[string]map[string]any
	status map[string]loop.ParamsStatus
	states map[string]loop.State
	rates  map[string]protocol.Rate
	// peers holds the consumers' leases by loop and instance (peers.go).
	peers map[string]map[string]protocol.Peer
}

var _ loop.TickStore = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{
		params: make(map[string]map[string]any),
		status: make(map[string]loop.ParamsStatus),
		states: make(map[string]loop.State),
		rates:  make(map[string]protocol.Rate),
	}
}

// ReadRate returns the RATE item of loopID, or an error wrapping
// protocol.ErrNotFound.
func (s *Store) ReadRate(_ context.Context, loopID string) (protocol.Rate, error) {
	return read(s, s.rates, "RATE", loopID, func(r protocol.Rate) protocol.Rate {
		r.Weights = maps.Clone(r.Weights)
		return r
	})
}

// WriteRate writes the RATE item of r.Loop.
func (s *Store) WriteRate(_ context.Context, r protocol.Rate) error {
	if r.Loop == "" {
		return fmt.Errorf("memstore write RATE: the item names no loop; want its loop id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Weights = maps.Clone(r.Weights)
	s.rates[r.Loop] = r
	return nil
}

// ReadParams returns the raw attributes of the PARAMS item of loopID (see
// loop.DecodeParams), or an error wrapping protocol.ErrNotFound.
func (s *Store) ReadParams(_ context.Context, loopID string) (map[string]any, error) {
	return read(s, s.params, "PARAMS", loopID, cloneAttrs)
}

// WriteParams replaces the PARAMS item of loopID with attrs, unchecked, as
// an operator's item edit would: the controller validates it at its next
// tick.
func (s *Store) WriteParams(_ context.Context, loopID string, attrs map[string]any) error {
	if loopID == "" {
		return fmt.Errorf("memstore write PARAMS: the item names no loop; want its loop id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params[loopID] = cloneAttrs(attrs)
	return nil
}

// WriteParamsIf replaces the PARAMS item of loopID with attrs and the edit
// version read+1, on condition that the stored item's edit version
// (loop.ParamsVersion; 0 for none or no item) is still read; otherwise it
// writes nothing and returns an error wrapping loop.ErrParamsConflict.
func (s *Store) WriteParamsIf(_ context.Context, loopID string, attrs map[string]any, read int64) error {
	if loopID == "" {
		return fmt.Errorf("memstore write PARAMS: the item names no loop; want its loop id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := loop.ParamsVersion(s.params[loopID]); got != read {
		return fmt.Errorf("memstore write PARAMS loop %q: edit version %d, read %d: %w", loopID, got, read, loop.ErrParamsConflict)
	}
	a := cloneAttrs(attrs)
	a[loop.AttrEditVersion] = float64(read + 1)
	s.params[loopID] = a
	return nil
}

// ReadStatus returns the PARAMS_STATUS item of loopID, or an error wrapping
// protocol.ErrNotFound.
func (s *Store) ReadStatus(_ context.Context, loopID string) (loop.ParamsStatus, error) {
	return read(s, s.status, "PARAMS_STATUS", loopID, func(st loop.ParamsStatus) loop.ParamsStatus { return st })
}

// ReadState returns the STATE item of loopID, or an error wrapping
// protocol.ErrNotFound.
func (s *Store) ReadState(_ context.Context, loopID string) (loop.State, error) {
	return read(s, s.states, "STATE", loopID, loop.State.Clone)
}

// read returns a copy (by clone) of loopID's item in m, the items of one
// kind (what), or an error wrapping protocol.ErrNotFound.
func read[T any](s *Store, m map[string]T, what, loopID string, clone func(T) T) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := m[loopID]
	if !ok {
		var zero T
		return zero, fmt.Errorf("memstore read %s loop %q: %w", what, loopID, protocol.ErrNotFound)
	}
	return clone(v), nil
}

// LoadLoops returns a snapshot of every loop that has any item.
func (s *Store) LoadLoops(_ context.Context) ([]loop.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make(map[string]bool)
	for id := range s.params {
		ids[id] = true
	}
	for id := range s.states {
		ids[id] = true
	}
	out := make([]loop.Snapshot, 0, len(ids))
	for id := range ids {
		snap := loop.Snapshot{Loop: id}
		if a, ok := s.params[id]; ok {
			snap.Params = cloneAttrs(a)
		}
		if st, ok := s.states[id]; ok {
			c := st.Clone()
			snap.State = &c
		}
		if st, ok := s.status[id]; ok {
			snap.Status = &st
		}
		snap.Peers = s.peersOf(id)
		out = append(out, snap)
	}
	return out, nil
}

// CommitTick writes STATE, RATE and PARAMS_STATUS at once if STATE's
// version is still c.PrevVersion.
func (s *Store) CommitTick(_ context.Context, c loop.Commit) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("memstore commit: %w", err)
	}
	id := c.State.Loop
	if err := encodable(c.State); err != nil {
		return fmt.Errorf("memstore commit loop %q: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.states[id].Version // 0 when missing
	if cur != c.PrevVersion {
		return fmt.Errorf("memstore commit loop %q at version %d (now %d): %w", id, c.PrevVersion, cur, loop.ErrConflict)
	}
	s.states[id] = c.State.Clone()
	if c.Rate != nil {
		r := *c.Rate
		r.Weights = maps.Clone(r.Weights)
		s.rates[id] = r
	}
	if c.Status != nil {
		s.status[id] = *c.Status
	}
	return nil
}

// encodable reports whether the DynamoDB store could encode st: it keeps the
// signals' records (their controllers' memory), the valid parameters and the balancer's state as JSON,
// which refuses NaN and Inf. The in-memory store refuses what it would.
func encodable(st loop.State) error {
	for _, part := range []struct {
		name string
		v    any
	}{{"signal records", st.Signals}, {"valid params", st.Params}, {"balancer state", st.Balance}} {
		if _, err := json.Marshal(part.v); err != nil {
			return fmt.Errorf("%s: %w", part.name, err)
		}
	}
	return nil
}

func cloneAttrs(a map[string]any) map[string]any {
	if a == nil {
		return nil
	}
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneAttrs(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	default:
		return v
	}
}
