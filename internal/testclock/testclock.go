// Package testclock is virtual time for tests: a clock that moves only when
// a test advances it or when code under test sleeps on it. It satisfies the
// Now/Sleep clock that consumers, pollers and publishers take.
package testclock

import (
	"context"
	"sync"
	"time"
)

// Clock is virtual time, safe for concurrent use. The zero value starts at
// the zero time; New starts it elsewhere.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the virtual time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleep advances the clock by d at once, unless ctx is already done, in
// which case it returns ctx's error and leaves the clock where it is.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

// Stopper is a Clock that ends a run at a virtual time: a Sleep that would
// pass Until calls Cancel and returns context.Canceled instead of advancing.
type Stopper struct {
	*Clock
	Until  time.Time
	Cancel context.CancelFunc
}

// Sleep advances the clock by d, or stops the run if that would pass Until.
func (s *Stopper) Sleep(ctx context.Context, d time.Duration) error {
	if s.Now().Add(d).After(s.Until) {
		s.Cancel()
		return context.Canceled
	}
	return s.Clock.Sleep(ctx, d)
}
