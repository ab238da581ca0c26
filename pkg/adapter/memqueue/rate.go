package memqueue

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

var _ consume.RateReader = (*Rates)(nil)

// Rates is an in-memory RATE store that counts its reads. Safe for
// concurrent use.
type Rates struct {
	mu    sync.Mutex
	rates map[string]protocol.Rate
	reads int
	err   error
}

// NewRates returns an empty store.
func NewRates() *Rates { return &Rates{rates: map[string]protocol.Rate{}} }

// Put writes r under r.Loop.
func (s *Rates) Put(r protocol.Rate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rates[r.Loop] = r
}

// Delete removes a loop's rate.
func (s *Rates) Delete(loopID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rates, loopID)
}

// SetErr makes reads fail with err (nil: succeed again).
func (s *Rates) SetErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// ReadRate returns the loop's rate, or protocol.ErrNotFound.
func (s *Rates) ReadRate(_ context.Context, loopID string) (protocol.Rate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.err != nil {
		return protocol.Rate{}, fmt.Errorf("read rate %s: %w", loopID, s.err)
	}
	r, ok := s.rates[loopID]
	if !ok {
		return protocol.Rate{}, fmt.Errorf("read rate %s: %w", loopID, protocol.ErrNotFound)
	}
	return r, nil
}

// Reads returns how many reads were made.
func (s *Rates) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}
