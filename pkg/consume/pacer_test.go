package consume_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

func TestPacerFollowsRate(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		batch int
		total int
	}{
		{"1/s batches of 1", 1, 1, 60},
		{"10/s batches of 10", 10, 10, 600},
		{"100/s batches of 10", 100, 10, 6000},
		{"1000/s batches of 10", 1000, 10, 60000},
		{"37.5/s batches of 7", 37.5, 7, 2254},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			p := consume.NewPacer(clk, tt.rate, tt.batch)
			start := clk.Now()
			for sent := 0; sent < tt.total; sent += tt.batch {
				if err := p.Wait(context.Background(), tt.batch); err != nil {
					t.Fatalf("Wait(%d) = %v", tt.batch, err)
				}
			}
			// The first burst goes at once; the rest follows the rate.
			got := clk.Now().Sub(start).Seconds()
			want := float64(tt.total-tt.batch) / tt.rate
			if math.Abs(got-want) > 1e-6*want+1e-9 {
				t.Errorf("%d messages at %v/s took %.6f s; want %.6f s", tt.total, tt.rate, got, want)
			}
		})
	}
}

func TestPacerUnlimitedAndPaused(t *testing.T) {
	clk := newFakeClock()
	p := consume.NewPacer(clk, math.Inf(1), 10)
	for range 1000 {
		if d, err := p.Delay(10); err != nil || d != 0 {
			t.Fatalf("unlimited Delay(10) = %v, %v; want 0, nil", d, err)
		}
	}
	p.SetRate(0)
	if _, err := p.Delay(1); !errors.Is(err, consume.ErrPaused) {
		t.Fatalf("Delay at rate 0 = %v; want ErrPaused", err)
	}
	p.SetRate(5)
	if got := p.Rate(); got != 5 {
		t.Fatalf("Rate() = %v; want 5", got)
	}
}

func TestPacerRateChangeTakesEffect(t *testing.T) {
	clk := newFakeClock()
	p := consume.NewPacer(clk, 10, 1)
	p.Wait(context.Background(), 1) // spend the burst
	d, _ := p.Delay(1)
	if d != 100*time.Millisecond {
		t.Fatalf("Delay at 10/s = %v; want 100ms", d)
	}
	clk.Advance(d)
	p.SetRate(100)
	d, _ = p.Delay(1)
	if d != 10*time.Millisecond {
		t.Fatalf("Delay after SetRate(100) = %v; want 10ms", d)
	}
}

func TestPacerWaitCancelledGivesTokensBack(t *testing.T) {
	clk := newFakeClock()
	p := consume.NewPacer(clk, 10, 10)
	p.Wait(context.Background(), 10) // spend the bucket
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx, 10); err == nil {
		t.Fatal("Wait on a cancelled context = nil; want an error")
	}
	// The cancelled reservation is returned: 10 more messages wait 1 s, not 2 s.
	if d, _ := p.Delay(10); d != time.Second {
		t.Errorf("Delay(10) after a cancelled Wait = %v; want 1s", d)
	}
}
