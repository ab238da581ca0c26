package consume_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/testclock"
)

// fakeClock is virtual time that also adds up what was slept on it.
type fakeClock struct {
	*testclock.Clock
	slept atomic.Int64 // ns
}

func newFakeClock() *fakeClock {
	return &fakeClock{Clock: testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := c.Clock.Sleep(ctx, max(d, 0)); err != nil {
		return err
	}
	c.slept.Add(int64(max(d, 0)))
	return nil
}
