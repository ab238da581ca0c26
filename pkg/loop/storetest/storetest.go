// Package storetest is the contract test suite of the loop stores: every
// implementation (memstore, ddbstore on moto or DynamoDB) runs the same
// tests, so that the controller and the consumers can rely on the same
// semantics whichever store they are given.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// RateStore is the RATE part of a store.
type RateStore interface {
	ReadRate(ctx context.Context, loopID string) (protocol.Rate, error)
	WriteRate(ctx context.Context, r protocol.Rate) error
}

// TestRate runs the RATE contract against a fresh store from newStore.
func TestRate(t *testing.T, newStore func(t *testing.T) RateStore) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, newStore func(t *testing.T) RateStore)
	}{
		{"missing", testRateMissing},
		{"round trip", testRateRoundTrip},
		{"overwrite", testRateOverwrite},
		{"loops are separate", testRateLoopsSeparate},
		{"empty loop id refused", testRateEmptyLoopRefused},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore) })
	}
}

// rateTime is the time the RATE contract writes at.
func rateTime() time.Time { return time.Date(2026, 11, 29, 23, 0, 0, 123456789, time.UTC) }

func testRateMissing(t *testing.T, newStore func(t *testing.T) RateStore) {
	ctx := context.Background()
	s := newStore(t)
	_, err := s.ReadRate(ctx, "nope")
	if !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("ReadRate(%q) error = %v; want protocol.ErrNotFound", "nope", err)
	}
}

func testRateRoundTrip(t *testing.T, newStore func(t *testing.T) RateStore) {
	ctx := context.Background()
	at := rateTime()
	tests := []struct {
		name string
		rate protocol.Rate
	}{
		{"plain", protocol.Rate{Loop: "orders", PerSecond: 123.25, WrittenAt: at, ExpiresAt: at.Add(3 * time.Minute), Tick: 7}},
		{"zero rate", protocol.Rate{Loop: "zero", PerSecond: 0, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 1}},
		{"weights", protocol.Rate{Loop: "fleet", PerSecond: 900, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 42,
			Weights: map[string]float64{"db-1": 0.5, "db-2": 0.25, "db-3": 0.25}}},
		{"inner settings", protocol.Rate{Loop: "inner", PerSecond: 50, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 3,
			Inner: &protocol.InnerSettings{Tolerance: 0.3, ReactionTime: 25 * time.Second}}},
		{"inner settings with settle", protocol.Rate{Loop: "settle", PerSecond: 50, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 3,
			Inner: &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 2 * time.Second, Settle: 15 * time.Second, Unsettled: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			if err := s.WriteRate(ctx, tt.rate); err != nil {
				t.Fatalf("WriteRate: %v", err)
			}
			got, err := s.ReadRate(ctx, tt.rate.Loop)
			if err != nil {
				t.Fatalf("ReadRate(%q): %v", tt.rate.Loop, err)
			}
			assertRate(t, got, tt.rate)
		})
	}
}

func testRateOverwrite(t *testing.T, newStore func(t *testing.T) RateStore) {
	ctx := context.Background()
	at := rateTime()
	s := newStore(t)
	first := protocol.Rate{Loop: "l", PerSecond: 10, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 1,
		Weights: map[string]float64{"a": 1}, Inner: &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second}}
	second := protocol.Rate{Loop: "l", PerSecond: 20, WrittenAt: at.Add(time.Minute), ExpiresAt: at.Add(2 * time.Minute), Tick: 2}
	for _, r := range []protocol.Rate{first, second} {
		if err := s.WriteRate(ctx, r); err != nil {
			t.Fatalf("WriteRate: %v", err)
		}
	}
	got, err := s.ReadRate(ctx, "l")
	if err != nil {
		t.Fatalf("ReadRate: %v", err)
	}
	assertRate(t, got, second)
}

func testRateLoopsSeparate(t *testing.T, newStore func(t *testing.T) RateStore) {
	ctx := context.Background()
	at := rateTime()
	s := newStore(t)
	a := protocol.Rate{Loop: "a", PerSecond: 1, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 1}
	b := protocol.Rate{Loop: "b", PerSecond: 2, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 5}
	for _, r := range []protocol.Rate{a, b} {
		if err := s.WriteRate(ctx, r); err != nil {
			t.Fatalf("WriteRate: %v", err)
		}
	}
	for _, want := range []protocol.Rate{a, b} {
		got, err := s.ReadRate(ctx, want.Loop)
		if err != nil {
			t.Fatalf("ReadRate(%q): %v", want.Loop, err)
		}
		assertRate(t, got, want)
	}
}

func testRateEmptyLoopRefused(t *testing.T, newStore func(t *testing.T) RateStore) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.WriteRate(ctx, protocol.Rate{PerSecond: 1}); err == nil {
		t.Fatal("WriteRate with empty loop id = nil; want an error")
	}
}

func assertRate(t *testing.T, got, want protocol.Rate) {
	t.Helper()
	if got.Loop != want.Loop || got.PerSecond != want.PerSecond || got.Tick != want.Tick ||
		!got.WrittenAt.Equal(want.WrittenAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("rate = %+v; want %+v", got, want)
	}
	if len(got.Weights) != len(want.Weights) {
		t.Errorf("weights = %v; want %v", got.Weights, want.Weights)
	}
	for k, v := range want.Weights {
		if got.Weights[k] != v {
			t.Errorf("weights[%q] = %v; want %v", k, got.Weights[k], v)
		}
	}
	if (got.Inner == nil) != (want.Inner == nil) || (got.Inner != nil && *got.Inner != *want.Inner) {
		t.Errorf("inner = %+v; want %+v", got.Inner, want.Inner)
	}
}
