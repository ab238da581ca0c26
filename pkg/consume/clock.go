package consume

import (
	"context"
	"errors"
	"time"
)

// ErrPaused is returned by a Pacer whose rate is zero: nothing may go until
// the rate rises.
var ErrPaused = errors.New("consumption paused: allowed rate is zero")

// WallClock is the real time.
type WallClock struct{}

var _ Clock = WallClock{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx ends.
func (WallClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
