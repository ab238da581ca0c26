package memqueue

import (
	"context"
	"fmt"
	"sync"

	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/loop"
)

var _ consume.RateReader = (*Rates)(nil)

// Rates is an in-memory RATE store that counts its reads. Safe for
// concurrent use.
type Rates struct {
	mu    sync.Mutex
	rates map[string]loop.Rate
	reads int
	err   error
}

// NewRates returns an empty store.
func NewRates() *Rates { return &Rates{rates: map[string]loop.Rate{}} }

// Put writes r under r.Loop.
func (s *Rates) Put(r loop.Rate) {
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

// ReadRate returns the loop's rate, or loop.ErrNotFound.
func (s *Rates) ReadRate(_ context.Context, loopID string) (loop.Rate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.err != nil {
		return loop.Rate{}, fmt.Errorf("read rate %s: %w", loopID, s.err)
	}
	r, ok := s.rates[loopID]
	if !ok {
		return loop.Rate{}, fmt.Errorf("read rate %s: %w", loopID, loop.ErrNotFound)
	}
	return r, nil
}

// Reads returns how many reads were made.
func (s *Rates) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}
