package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// silentRates answers its first read, then hangs until the caller gives
// up: a DynamoDB connection that went silent.
type silentRates struct {
	reads    int
	deadline bool // the hanging read's context had a deadline
}

func (s *silentRates) ReadRate(ctx context.Context, loop string) (protocol.Rate, error) {
	s.reads++
	if s.reads == 1 {
		return protocol.Rate{Loop: loop, PerSecond: 7, ExpiresAt: time.Now().Add(time.Hour)}, nil
	}
	_, s.deadline = ctx.Deadline()
	<-ctx.Done()
	return protocol.Rate{}, ctx.Err()
}

// silentPeers hangs every count until the caller gives up.
type silentPeers struct{ deadline bool }

func (s *silentPeers) Live(ctx context.Context) (int, error) {
	_, s.deadline = ctx.Deadline()
	<-ctx.Done()
	return 0, ctx.Err()
}

// A RATE read (and a count of live consumers) on a connection that hangs
// silently must not hang the consumer: even without a deadline on the
// caller's context (the worker), each read is bounded
// (RateCacheConfig.ReadTimeout), and the last valid RATE stays in force.
func TestRateReadOnASilentConnectionIsBounded(t *testing.T) {
	rates, peers := &silentRates{}, &silentPeers{}
	clk := newFakeClock()
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 50, ReadTimeout: 50 * time.Millisecond}, rates, peers, clk, nil, nil)
	ctx := context.Background()
	if a := rc.Allowed(ctx); a.Total != 7 {
		t.Fatalf("first Allowed = %+v; want RATE 7", a)
	}
	clk.Advance(time.Minute)
	done := make(chan consume.Allowed, 1)
	go func() { done <- rc.Allowed(ctx) }()
	select {
	case a := <-done:
		if a.Total != 7 || a.Fallback {
			t.Errorf("Allowed after a silent read = %+v; want the last valid RATE 7", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Allowed hung on a silent RATE read (no timeout of its own)")
	}
	if !rates.deadline || !peers.deadline {
		t.Errorf("the silent reads' contexts had deadlines: RATE %v, peers %v; want both bounded", rates.deadline, peers.deadline)
	}
}
