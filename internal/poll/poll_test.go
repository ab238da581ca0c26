package poll_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/poll"
)

func TestUntil(t *testing.T) {
	ctx := context.Background()
	calls := 0
	if err := poll.Until(ctx, time.Millisecond, func() (bool, error) { calls++; return calls == 3, nil }); err != nil || calls != 3 {
		t.Errorf("Until a condition that holds at the third call = %v after %d calls; want nil after 3", err, calls)
	}
	boom := errors.New("boom")
	calls = 0
	if err := poll.Until(ctx, time.Millisecond, func() (bool, error) { calls++; return false, boom }); !errors.Is(err, boom) || calls != 1 {
		t.Errorf("Until a failing condition = %v after %d calls; want boom after 1", err, calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	calls = 0
	err := poll.Until(cctx, time.Millisecond, func() (bool, error) {
		if calls++; calls == 2 {
			cancel()
		}
		return false, nil
	})
	if !errors.Is(err, context.Canceled) || calls != 2 {
		t.Errorf("Until with the context cancelled = %v after %d calls; want context.Canceled after 2", err, calls)
	}
}
