package testclock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testclock"
)

// start is where every clock of these tests starts.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestClock(t *testing.T) {
	c := testclock.New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v; want %v", got, start)
	}
	c.Advance(time.Minute)
	if err := c.Sleep(context.Background(), 2*time.Second); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if got, want := c.Now(), start.Add(time.Minute+2*time.Second); !got.Equal(want) {
		t.Errorf("Now() after Advance and Sleep = %v; want %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v; want context.Canceled", err)
	}
	if got, want := c.Now(), start.Add(time.Minute+2*time.Second); !got.Equal(want) {
		t.Errorf("Now() after a cancelled Sleep = %v; want %v (unchanged)", got, want)
	}
}

func TestStopper(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &testclock.Stopper{Clock: testclock.New(start), Until: start.Add(10 * time.Second), Cancel: cancel}
	if err := s.Sleep(ctx, 10*time.Second); err != nil {
		t.Fatalf("Sleep up to Until: %v", err)
	}
	if err := s.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep past Until = %v; want context.Canceled", err)
	}
	if ctx.Err() == nil {
		t.Errorf("Sleep past Until did not cancel the run")
	}
	if got, want := s.Now(), start.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v; want %v", got, want)
	}
}
