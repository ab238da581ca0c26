// Package memstore keeps the items of every loop (PARAMS, STATE, RATE) in
// memory, with the same semantics as the DynamoDB store: for tests, the
// embedded demo and the dashboard demo.
package memstore

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// Store is an in-memory store of loop items. Its zero value is not usable:
// call New. It is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	rates map[string]loop.Rate
}

// New returns an empty store.
func New() *Store {
	return &Store{
		rates: make(map[string]loop.Rate),
	}
}

// ReadRate returns the RATE item of loopID, or an error wrapping
// loop.ErrNotFound.
func (s *Store) ReadRate(_ context.Context, loopID string) (loop.Rate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rates[loopID]
	if !ok {
		return loop.Rate{}, fmt.Errorf("memstore read RATE loop %q: %w", loopID, loop.ErrNotFound)
	}
	r.Weights = maps.Clone(r.Weights)
	return r, nil
}

// WriteRate writes the RATE item of r.Loop.
func (s *Store) WriteRate(_ context.Context, r loop.Rate) error {
	if r.Loop == "" {
		return fmt.Errorf("memstore write RATE: empty loop id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Weights = maps.Clone(r.Weights)
	s.rates[r.Loop] = r
	return nil
}
